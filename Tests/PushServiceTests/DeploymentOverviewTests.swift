import PushContracts
import PushCore
import PushJSON
@testable import PushService
import PushTestSupport
import Testing

/// The overview of several instances (SPEC §13: every instance answers for all of them): each
/// instance's report merged.
@Suite("Deployment overview", .processLevel)
struct DeploymentOverviewTests {
    static func sender(_ app: String, _ provider: String, _ rate1: Double, _ rate5: Double, success: Double?, p50: Int64?, p99: Int64?, tooMany: Int64 = 0, paused: JSON = .null) -> JSON {
        [
            "app": .string(app), "provider": .string(provider), "destination": .null, "perSecond1m": .double(rate1), "perSecond5m": .double(rate5),
            "successRatio": success.map { .double($0) } ?? .null, "p50Ms": p50.map { .int($0) } ?? .null, "p99Ms": p99.map { .int($0) } ?? .null,
            "tooManyRequests5m": .int(tooMany), "paused": paused,
        ]
    }

    @Test("senders merged: rates and 429s summed, success weighted by attempts, the slowest percentiles, the first pause, who sent")
    func merged() throws {
        let reports: [(instance: String, report: JSON)] = [
            ("node-1", ["senders": [Self.sender("toto", "fcm", 10, 3, success: 1, p50: 25, p99: 100), Self.sender("toto", "apns", 1, 1, success: nil, p50: nil, p99: nil)]]),
            ("node-2", ["senders": [Self.sender("toto", "fcm", 5, 1, success: 0.5, p50: 50, p99: 75, tooMany: 4, paused: ["reason": "HTTP 429", "since": 7])]]),
            // Written by another instance: damaged entries are passed over.
            ("node-3", ["senders": [["app": 1], "text", ["provider": "fcm"], Self.sender("toto", "fcm", .infinity, -2, success: 9, p50: 1, p99: 1)]]),
            ("node-4", "not an object"),
        ]
        let rows = DeploymentOverview.mergedSenders(reports)
        #expect(rows.map { $0["provider"]?.stringValue } == ["apns", "fcm"])
        let fcm = rows[1]
        #expect(fcm["perSecond1m"] == .double(15) && fcm["perSecond5m"] == .double(4))
        #expect(fcm["successRatio"] == .double(0.875), "(1×3 + 0.5×1) / 4")
        #expect(fcm["p50Ms"] == .int(50) && fcm["p99Ms"] == .int(100) && fcm["tooManyRequests5m"] == .int(4))
        #expect(fcm["paused"] == ["reason": "HTTP 429", "since": 7, "instance": "node-2"])
        #expect(fcm["instances"] == ["node-1", "node-2", "node-3"])
        #expect(rows[0]["successRatio"] == .null && rows[0]["instances"] == ["node-1"])
    }

    @Test("paced senders merged: the instances' shares of the budget, their rates, quota answers and waits summed")
    func mergedPacing() throws {
        var first = Self.sender("toto", "fcm", 10, 3, success: 1, p50: 25, p99: 100)
        first = .object(first.objectValue!.setting(Key("pacing"), to: ["budgetPerSecond": 5_000, "perSecond": 100, "refusals": 3, "waited": 40]))
        var second = Self.sender("toto", "fcm", 5, 1, success: 1, p50: 20, p99: 80)
        second = .object(second.objectValue!.setting(Key("pacing"), to: ["budgetPerSecond": 5_000, "perSecond": 95.5, "refusals": 1, "waited": -7]))
        let rows = DeploymentOverview.mergedSenders([
            ("node-1", ["senders": [first, Self.sender("toto", "apns", 1, 1, success: nil, p50: nil, p99: nil)]]), ("node-2", ["senders": [second]]),
        ])
        #expect(rows[1]["pacing"] == ["budgetPerSecond": 10_000, "perSecond": 195.5, "refusals": 4, "waited": 40])
        #expect(rows[0]["pacing"] == .null, "not paced")
    }

    @Test("lists marked with their instance; the lag from the newest record any instance processed; a report too large keeps its sending figures")
    func listsLagAndSize() throws {
        let reports: [(instance: String, report: JSON)] = [
            ("node-1", ["paused": [["app": "a", "provider": "webhook", "destination": "orders", "reason": "HTTP 401", "since": 1, "probeAt": 2]], "newestTs": ["a": 900, "b": "x"]]),
            ("node-2", ["paused": [1, ["app": "a"]], "credentials": [["app": "a", "provider": "fcm"]], "newestTs": ["a": 950, "c": 100]]),
        ]
        let paused = DeploymentOverview.each("paused", of: reports)
        #expect(paused.count == 2 && paused[0]["instance"] == "node-1" && paused[1]["instance"] == "node-2")
        let senders = DeploymentOverview.pausedSenders(paused)
        #expect(senders.count == 1 && senders[0].destination == "orders" && senders[0].instance == "node-1", "an entry without its fields is not a pause")
        #expect(DeploymentOverview.each("credentials", of: reports) == [["app": "a", "provider": "fcm", "instance": "node-2"]])
        #expect(DeploymentOverview.lag(reports, now: 1_000) == ["a": 50, "c": 900])
        #expect(DeploymentOverview.lag(reports, now: 0) == ["a": 0, "c": 0], "a record from the future is no lag")

        let huge: JSON = [
            "senders": .array((0..<3_000).map { Self.sender("app-\($0)", "webhook", 1, 1, success: 1, p50: 1, p99: 1) }),
            "sending": ["inFlight": 3], "paused": [],
        ]
        let bytes = DeploymentOverview.bytes(huge)
        #expect(bytes.count <= InstanceReport.maximumBytes)
        let read = try JSONParser.parse(bytes)
        #expect(read["truncated"] == .bool(true) && read["sending"] == ["inFlight": 3] && read["senders"] == nil)
    }
}
