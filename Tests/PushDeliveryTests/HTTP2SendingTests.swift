import Foundation
import NIOCore
import PushCore
import PushContracts
@testable import PushDelivery
import PushHTTP
import PushFakes
import PushTestSupport
import Synchronization
import Testing

/// Senders over the HTTP/2 transport against real servers: GOAWAY resends and deadlines, as
/// the sender's budget counts them.
@Suite("Sends over HTTP/2 against nginx and the fake providers", .processLevel, .serialized, .enabled(if: HTTP2TestServer.enabled))
struct HTTP2SendingTests {
    static let ca = ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path

    static func transport(connections: Int = 2) throws -> HTTP2Transport {
        try HTTP2Transport(configuration: .init(connectionsPerOrigin: connections, caFile: ca), fallback: try HTTP1Transport(caFile: ca), ownsFallback: true)
    }

    @Test("nginx closing each connection with GOAWAY after 500 requests: every request answered (lost ones resent at once), connections replaced")
    func goAway() async throws {
        let server = try HTTP2TestServer.nginx(requestsPerConnection: 500)
        defer { server.stop() }
        let transport = try Self.transport(connections: 2)
        let counters = DeliveryCounters()
        let context = SenderContext(transport: transport, timeout: .seconds(10), clock: SystemClock(), counters: counters)
        let url = server.url + "/v1/projects/p/messages:send"
        let (results, _) = await Burst.run(count: 3_000, concurrency: 150) { _ throws(TransportError) in
            try await context.send(OutgoingRequest(url: url, headers: [], body: Array("{}".utf8)), provider: .fcm)
        }
        try await transport.shutdown()
        let failures = results.values.compactMap { result -> TransportError? in if case .failure(let error) = result { error } else { nil } }
        #expect(failures.isEmpty, "\(failures.count) failed, e.g. \(failures.prefix(3))")
        print("GOAWAY every 500 requests: 3,000 answered, \(counters.resends(provider: "fcm")) resent")
    }

    @Test("a stream the server never answers fails at its deadline as a timeout (not lost, not resent); the 50 beside it on the same connections are answered at once")
    func stalledStream() async throws {
        let fakes = try await FakeProviders.start(tls: true)
        defer { Task { await fakes.stop() } }
        fakes.script("stalled-device", [.slow(.seconds(30), then: .normal)])
        let transport = try Self.transport(connections: 1)
        let counters = DeliveryCounters()
        let context = SenderContext(transport: transport, timeout: .seconds(1), clock: SystemClock(), counters: counters)
        let sender = FCMSender(key: fakes.serviceAccount, endpoint: fakes.fcmEndpoint, context: context)
        func notification(_ token: String) -> StoredNotification {
            StoredNotification(
                id: 1,
                entry: OutboxEntry(
                    app: "toto", subscriptionHandle: 1, subscriptionID: "s", kind: .fcm, target: token, destination: nil, notification: .value,
                    payload: Array(#"{"s":"OK","t":"value"}"#.utf8), recordSeq: 1),
                createdAt: 0, nextAttemptAt: 0, attempts: 0)
        }
        // The access token and the connection first, so that every send below is one request.
        // (A loaded machine may take longer than the 1 s deadline for the first handshakes:
        // what they set up stays for the next try.)
        var warmUp = await sender.send(notification("warm-up"), now: 0)
        for _ in 0..<30 {
            if case .delivered = warmUp { break }
            warmUp = await sender.send(notification("warm-up"), now: 0)
        }
        guard case .delivered = warmUp else {
            Issue.record("the first send: \(warmUp)")
            return
        }
        let start = ContinuousClock.now
        async let stalled = sender.send(notification("stalled-device"), now: 0)
        let others = await withTaskGroup(of: (DeliveryOutcome, Duration).self) { group in
            for index in 0..<50 {
                group.addTask {
                    let began = ContinuousClock.now
                    return (await sender.send(notification("device-\(index)"), now: 0), ContinuousClock.now - began)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let outcome = await stalled
        let took = ContinuousClock.now - start
        guard case .retry(let reason, _, _) = outcome else {
            Issue.record("the stalled send: \(outcome)")
            return
        }
        #expect(reason.contains("deadline"), "\(reason)")
        #expect(took >= .seconds(1) && took < .seconds(10), "\(took)")
        #expect(counters.resends(provider: "fcm") == 0)
        #expect(others.allSatisfy { if case .delivered = $0.0 { true } else { false } }, "\(others.map(\.0).prefix(3))")
        #expect(others.allSatisfy { $0.1 < .seconds(1) }, "\(others.map(\.1).max() ?? .zero)")
        try await transport.shutdown()
    }
}
