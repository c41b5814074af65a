import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PushCore
import PushJSON
import PushJOSE
import PushService
import PushFakes
import Synchronization

extension Demo {
    /// Prints what the fakes receive as it arrives.
    func follow() async {
        while !Task.isCancelled {
            printNew()
            try? await Task.sleep(for: .milliseconds(25))
        }
        printNew()
    }

    func printNew() {
        let received = fakes.received.filter { ["fcm", "hms", "webhook", "apns", "webpush"].contains($0.provider) }
        let start = printed.withLock { count -> Int in
            defer { count = received.count }
            return count
        }
        guard start < received.count else { return }
        for request in received[start...] { describe(request) }
    }

    func describe(_ request: FakeProviders.Received) {
        let subscription = subscriptions.first { $0.provider == request.provider && $0.target == request.target }
        let name = subscription?.name ?? request.target
        let answer: String
        switch (request.provider, request.status) {
        case (_, 200) where request.provider == "hms": answer = "HMS answered 200 (code 80000000, success)"
        case ("apns", 200): answer = "APNs answered 200 (a background push: aps.content-available, the data keys beside it)"
        case ("webpush", 201): answer = "the push service answered 201 Created (VAPID checked; the body decrypted with the browser's key)"
        case (_, 200) where retried(request): answer = "FCM answered 200: the retry of the 503 above went through"
        case (_, 200): answer = "\(request.provider == "fcm" ? "FCM" : "the webhook") answered 200"
        case ("fcm", 503): answer = "FCM answered 503 UNAVAILABLE: retried after the back-off (1 s ±20 %)"
        case ("hms", _) where String(decoding: request.data, as: UTF8.self).contains("OnlyKeys"): answer = "HMS answered 200"
        case ("fcm", 404): answer = "FCM answered 404 UNREGISTERED: the subscription is revoked (reason delivery_rejected), nothing more is sent to it"
        default: answer = "answered \(request.status)"
        }
        say("     → \(pad(name, 10)) via \(pad(request.provider, 7)) \(answer)")
        guard request.status == 200 || request.status == 201 || request.status == 404 || request.status == 503 else { return }
        let event: String
        if request.provider == "webhook" {
            event = "body " + String(decoding: request.data, as: UTF8.self)
        } else {
            let payload = Self.dataMap(request)
            let version = payload.contains("\"ver\":\"v2\"") ? (payload.contains("\"kid\"") ? "v2, encrypted (JWE)" : "v2, signed (JWS)") : "v1"
            let size = request.data.count
            if let decoded = try? PayloadDecoder(keys: keys).decode(Array(payload.utf8)) {
                event = "\(version), \(size) bytes; decoded: \(String(decoding: decoded, as: UTF8.self).clipped(220))"
            } else {
                event = "\(version), \(size) bytes: \(payload.clipped(220))"
            }
        }
        say("                        \(event)")
    }

    /// The data map a device got: APNs's body without `aps`; Web Push's decrypted body.
    static func dataMap(_ request: FakeProviders.Received) -> String {
        let text = String(decoding: request.data, as: UTF8.self)
        let aps = #"{"aps":{"content-available":1},"#
        return request.provider == "apns" && text.hasPrefix(aps) ? "{" + text.dropFirst(aps.count) : text
    }

    /// Whether the request before this one to the same target was refused with a 503.
    func retried(_ request: FakeProviders.Received) -> Bool {
        let earlier = fakes.received(provider: request.provider).filter { $0.target == request.target && $0.arrivedAt <= request.arrivedAt }
        return earlier.count >= 2 && earlier[earlier.count - 2].status == 503
    }

    /// Waits until nothing new arrived at the fakes for a moment (the notifications of a record
    /// have gone out).
    func waitQuietly() async throws {
        var last = -1
        var stable = 0
        while stable < 6 {
            try await Task.sleep(for: .milliseconds(50))
            let count = fakes.received.count
            stable = count == last ? stable + 1 : 0
            last = count
        }
    }

    func statuses(_ name: String) -> [Int] {
        guard let subscription = subscriptions.first(where: { $0.name == name }) else { return [] }
        return fakes.received(provider: subscription.provider).filter { $0.target == subscription.target }.map(\.status)
    }

    /// Every step of the story, checked: what each device and webhook must have received.
    func waitForExpectations() async throws {
        let expectations: [(String, () -> Bool)] = [
            ("pixel received its profile, then a TooBig payload", { self.statuses("pixel").filter { $0 == 200 }.count >= 3 && self.seen("pixel", "TooBig") }),
            ("iphone was woken up for the inbox", { self.statuses("iphone").contains(200) }),
            ("mate received child events, then an OnlyKeys one", { self.statuses("mate").filter { $0 == 200 }.count >= 3 && self.seen("mate", "OnlyKeys") }),
            ("tablet received encrypted values", { self.statuses("tablet").filter { $0 == 200 }.count >= 3 }),
            ("ipad was told of the new message through APNs", { self.statuses("ipad").contains(200) && self.seen("ipad", "OK") }),
            ("the browser received the lobby's child events through Web Push", { self.statuses("browser").filter { $0 == 201 }.count >= 2 && self.seen("browser", "OnlyKeys") }),
            ("the webhook received the order", { self.statuses("crm").contains(200) }),
            ("flaky-phone: a 503, then delivered after the retry", { self.statuses("flaky").first == 503 && self.statuses("flaky").contains(200) }),
            ("old-phone: UNREGISTERED once, then nothing", { self.statuses("old-phone") == [404] }),
        ]
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if expectations.allSatisfy({ $0.1() }) { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        try await waitQuietly()
        for (what, holds) in expectations where !holds() { failures.append(what) }
    }

    /// Whether `name` received a payload whose event has status `status`.
    func seen(_ name: String, _ status: String) -> Bool {
        guard let subscription = subscriptions.first(where: { $0.name == name }) else { return false }
        return fakes.received(provider: subscription.provider).contains { request in
            guard request.target == subscription.target, let event = try? PayloadDecoder(keys: keys).decode(Array(Self.dataMap(request).utf8)) else { return false }
            return (try? JSONParser.parse(event))?["s"] == .string(status)
        }
    }

    func checkRevoked() async throws {
        guard let old = subscriptions.first(where: { $0.name == "old-phone" }) else { return }
        let answer = try await request("/datasync/v2/toto/subscriptions/alice/\(old.id)", method: .GET, body: nil)
        say("\n4. After UNREGISTERED: GET of old-phone's subscription answers \(answer.status) (it was revoked and deleted).")
        if answer.status != 404 { failures.append("old-phone's subscription still exists (\(answer.status))") }
    }

    func summaryTable() async throws {
        say("\n5. Summary: what each subscription received")
        say("   \(pad("name", 10)) \(pad("provider", 8)) \(pad("mode", 10)) \(pad("format", 7)) \(pad("2xx", 4)) \(pad("other", 6)) subscribed")
        for subscription in subscriptions {
            let statuses = statuses(subscription.name)
            let answer = try await request("/datasync/v2/toto/subscriptions/alice/\(subscription.id)", method: .GET, body: nil)
            let format = subscription.provider == "webhook" ? "-" : (subscription.document["format"]?.stringValue ?? "v2")
            let mode = subscription.document["mode"]?.stringValue ?? "noData"
            let other = statuses.filter { !(200..<300).contains($0) }.map(String.init).joined(separator: ",")
            say(
                "   \(pad(subscription.name, 10)) \(pad(subscription.provider, 8)) \(pad(mode, 10)) \(pad(format, 7)) "
                    + "\(pad(String(statuses.filter { (200..<300).contains($0) }.count), 4)) \(pad(other.isEmpty ? "-" : other, 6)) \(answer.status == 200 ? "yes" : "no (revoked)")")
        }
    }

    func metrics() async throws {
        let answer = try await operations("/metrics")
        let text = String(decoding: answer.body, as: UTF8.self)
        say("\n6. From /metrics (Prometheus text):")
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let interesting = ["pushdispatch_deliveries_total", "pushdispatch_records_ingested_total", "pushdispatch_revocations_total",
                "pushdispatch_retries_total", "pushdispatch_events_total", "pushdispatch_outbox_depth", "pushdispatch_subscriptions"]
            if interesting.contains(where: { line.hasPrefix($0) }), !line.hasSuffix(" 0"), !line.hasSuffix(" 0.0") { say("   \(line)") }
        }
        let status = try await operations("/status")
        if let json = try? JSONParser.parse(status.body) {
            say("\n7. pushdispatch status (the same table an operator gets from a running service):")
            for line in StatusTable.render(json).split(separator: "\n", omittingEmptySubsequences: false) { say("   \(line)") }
        }
        try await history()
    }

    /// Why flaky-phone got its notification late: its history from the operations API, as
    /// `pushdispatch history` prints it.
    func history() async throws {
        guard let flaky = subscriptions.first(where: { $0.target == "flaky-phone" }) else { return }
        let answer = try await operations("/ops/v1/subscriptions/toto/\(flaky.id)/history")
        let items = (try? JSONParser.parse(answer.body))?["items"]?.arrayValue ?? []
        say("\n8. Why did \(flaky.name) get its notification late? Its delivery history (GET /ops/v1/subscriptions/toto/<id>/history, or pushdispatch history):")
        for line in HistoryTable.attempts(items).split(separator: "\n") {
            let columns = line.split(separator: "\t", omittingEmptySubsequences: false)
            // When (the time of day), record, attempt, status, latency, outcome, reason.
            guard columns.count >= 10 else { continue }
            let when = columns[0].hasPrefix("AT") ? "AT (UTC)" : String(columns[0].dropFirst(11).dropLast())
            say("   " + pad(when, 13) + [columns[4], columns[1], columns[5], columns[6], columns[7], columns[9]].map { pad(String($0), 9) }.joined(separator: " "))
        }
        let outcomes = items.compactMap { $0["outcome"]?.stringValue }
        if outcomes.last != "retry" || !outcomes.contains("delivered") {
            failures.append("the history of flaky-phone should show the retry then the delivery, got \(outcomes)")
        }
    }
}
