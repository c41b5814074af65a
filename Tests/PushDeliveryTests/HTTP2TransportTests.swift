import Foundation
import NIOCore
import PushCore
@testable import PushDelivery
import PushTestSupport
import Synchronization
import Testing

/// What a request URL is read as.
@Suite("Request targets: the URLs a transport accepts")
struct RequestTargetTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var url: String
        /// secure, host, port, authority, path; nil: refused.
        var expected: (Bool, String, Int, String, String)?
        var testDescription: String { url }
    }

    @Test(
        "absolute http(s) URLs: host, port (default by scheme), :authority and :path; anything else refused",
        arguments: [
            Row(url: "https://fcm.googleapis.com/v1/projects/p/messages:send", expected: (true, "fcm.googleapis.com", 443, "fcm.googleapis.com", "/v1/projects/p/messages:send")),
            Row(url: "https://127.0.0.1:18443/v1/x?y=1", expected: (true, "127.0.0.1", 18443, "127.0.0.1:18443", "/v1/x?y=1")),
            Row(url: "http://localhost:8080", expected: (false, "localhost", 8080, "localhost:8080", "/")),
            Row(url: "https://[::1]:8443/a", expected: (true, "::1", 8443, "[::1]:8443", "/a")),
            Row(url: "https://[::1]/a", expected: (true, "::1", 443, "[::1]", "/a")),
            Row(url: "https://host?q", expected: (true, "host", 443, "host", "/?q")),
            Row(url: "ftp://host/a", expected: nil),
            Row(url: "https://", expected: nil),
            Row(url: "https://user@host/a", expected: nil),
            Row(url: "https://host:0/a", expected: nil),
            Row(url: "https://host:65536/a", expected: nil),
            Row(url: "https://host:99999999999999999999/a", expected: nil),
            Row(url: "https://host:/a", expected: nil),
            Row(url: "https://host/a#frag", expected: nil),
            Row(url: "https://ho st/a", expected: nil),
            Row(url: "https://host/a\r\nx: y", expected: nil),
            Row(url: "https://[::1/a", expected: nil),
            Row(url: "https://[zz]/a", expected: nil),
            Row(url: "https://[::1]x/a", expected: nil),
            Row(url: "/relative", expected: nil),
        ])
    func table(_ row: Row) {
        let target = RequestTarget(row.url)
        guard let expected = row.expected else {
            #expect(target == nil, "\(String(describing: target))")
            return
        }
        #expect(target?.secure == expected.0)
        #expect(target?.host == expected.1)
        #expect(target?.port == expected.2)
        #expect(target?.authority == expected.3)
        #expect(target?.path == expected.4)
    }

    @Test("seeded mutations of valid URLs: refused or read, never a crash; what is read is consistent")
    func mutations() {
        var mutator = Mutator(seed: 23)
        let seeds = ["https://fcm.googleapis.com/v1/projects/p/messages:send", "https://[::1]:8443/a?b", "http://127.0.0.1:80/"]
        for round in 0..<20_000 {
            let url = String(decoding: mutator.mutateBytes(Array(seeds[round % seeds.count].utf8)), as: UTF8.self)
            guard let target = RequestTarget(url) else { continue }
            #expect((1...65_535).contains(target.port), "\(url)")
            #expect(target.path.hasPrefix("/"), "\(url)")
            #expect(!target.host.isEmpty, "\(url)")
        }
    }
}

/// The HTTP/2 transport against real servers: nghttpd (nghttp2's reference server) and nginx
/// (the shared benchmark's fake FCM, which answers before it reads a request's body).
@Suite("HTTP/2 transport against nghttpd and nginx", .serialized, .enabled(if: HTTP2TestServer.enabled))
struct HTTP2TransportTests {
    static let ca = ProviderFixtures.root.appendingPathComponent("tls/ca.pem").path

    static func transport(connections: Int = 2) throws -> HTTP2Transport {
        try HTTP2Transport(
            configuration: .init(connectionsPerOrigin: connections, caFile: ca), fallback: try AsyncHTTPTransport(clients: 1, caFile: ca))
    }

    /// Sends `count` requests, `concurrency` at a time, each through `send`; returns each
    /// one's result and the longest a request took.
    static func burst(
        count: Int, concurrency: Int, _ send: @escaping @Sendable (Int) async throws(TransportError) -> ProviderAnswer
    ) async -> (results: [Int: Result<ProviderAnswer, TransportError>], longest: Duration) {
        await withTaskGroup(of: (Int, Result<ProviderAnswer, TransportError>, Duration).self) { group in
            var next = 0
            var results: [Int: Result<ProviderAnswer, TransportError>] = [:]
            var longest = Duration.zero
            func add() {
                let index = next
                next += 1
                group.addTask {
                    let start = ContinuousClock.now
                    do throws(TransportError) {
                        return (index, .success(try await send(index)), ContinuousClock.now - start)
                    } catch {
                        return (index, .failure(error), ContinuousClock.now - start)
                    }
                }
            }
            while next < min(count, concurrency) { add() }
            for await (index, result, took) in group {
                results[index] = result
                longest = max(longest, took)
                if next < count { add() }
            }
            return (results, longest)
        }
    }

    @Test("the first request on each new connection is answered: the server's SETTINGS, read before the connection is configured, are kept", arguments: ["nginx", "nghttpd"])
    func firstRequestOfEachConnection(server name: String) async throws {
        let server = try name == "nginx" ? HTTP2TestServer.nginx() : HTTP2TestServer.nghttpd()
        defer { server.stop() }
        var failures: [String] = []
        for round in 0..<40 {
            let transport = try Self.transport()
            do throws(TransportError) {
                let answer = try await transport.send(
                    OutgoingRequest(url: "https://localhost:\(server.port)/v1/x", headers: [("content-type", "application/json")], body: Array(#"{"a":1}"#.utf8)),
                    timeout: .seconds(10))
                if answer.status != 200 { failures.append("round \(round): \(answer.status)") }
            } catch {
                failures.append("round \(round): \(error.description)")
            }
            try await transport.shutdown()
        }
        #expect(failures.isEmpty, "\(failures.count) of 40 first requests failed: \(failures.prefix(3))")
    }

    @Test("nghttpd echoes every body: 3,000 requests, 200 at once on 2 connections, each answered with its own body")
    func echo() async throws {
        let server = try HTTP2TestServer.nghttpd()
        defer { server.stop() }
        let transport = try Self.transport()
        let url = server.url + "/echo"
        let (results, longest) = await Self.burst(count: 3_000, concurrency: 200) { index throws(TransportError) in
            let body = Array(#"{"message":{"token":"device-\#(index)","data":{"n":"\#(index)"}}}"#.utf8)
            return try await transport.send(OutgoingRequest(url: url, headers: [("content-type", "application/json")], body: body), timeout: .seconds(30))
        }
        try await transport.shutdown()
        #expect(results.count == 3_000)
        for (index, result) in results {
            switch result {
            case .success(let answer):
                #expect(answer.status == 200)
                #expect(String(decoding: answer.body, as: UTF8.self) == #"{"message":{"token":"device-\#(index)","data":{"n":"\#(index)"}}}"#)
            case .failure(let error):
                Issue.record("request \(index): \(error)")
            }
        }
        print("nghttpd echo: 3,000 requests, longest \(longest)")
    }

    @Test("nginx answering before it reads the bodies: 20,000 requests, 256 at once, none stalls (each within 5 s, the deadline)")
    func noStalledStream() async throws {
        let server = try HTTP2TestServer.nginx()
        defer { server.stop() }
        let transport = try Self.transport(connections: 4)
        let url = server.url + "/v1/projects/p/messages:send"
        let body = Array(String(repeating: "x", count: 600).utf8)
        let (results, longest) = await Self.burst(count: 20_000, concurrency: 256) { _ throws(TransportError) in
            try await transport.send(OutgoingRequest(url: url, headers: [("authorization", "Bearer ya29.fake")], body: body), timeout: .seconds(5))
        }
        try await transport.shutdown()
        let failures = results.values.compactMap { result -> TransportError? in if case .failure(let error) = result { error } else { nil } }
        #expect(failures.isEmpty, "\(failures.count) failed, e.g. \(failures.prefix(3))")
        #expect(results.values.allSatisfy { (try? $0.get())?.status == 200 })
        #expect(longest < .seconds(5))
        print("nginx: 20,000 requests, longest \(longest)")
    }

    @Test("nginx closing each connection with GOAWAY after 500 requests: every request answered (lost ones resent at once), connections replaced")
    func goAway() async throws {
        let server = try HTTP2TestServer.nginx(requestsPerConnection: 500)
        defer { server.stop() }
        let transport = try Self.transport(connections: 2)
        let counters = DeliveryCounters()
        let context = SenderContext(transport: transport, timeout: .seconds(10), clock: SystemClock(), counters: counters)
        let url = server.url + "/v1/projects/p/messages:send"
        let (results, _) = await Self.burst(count: 3_000, concurrency: 150) { _ throws(TransportError) in
            try await context.send(OutgoingRequest(url: url, headers: [], body: Array("{}".utf8)), provider: "fcm")
        }
        try await transport.shutdown()
        let failures = results.values.compactMap { result -> TransportError? in if case .failure(let error) = result { error } else { nil } }
        #expect(failures.isEmpty, "\(failures.count) failed, e.g. \(failures.prefix(3))")
        print("GOAWAY every 500 requests: 3,000 answered, \(counters.resends(provider: "fcm")) resent")
    }

    @Test("a server that does not agree on h2 (nginx without http2): requests go over HTTP/1.1, answered")
    func fallback() async throws {
        let server = try HTTP2TestServer.nginx(http2: false)
        defer { server.stop() }
        let transport = try Self.transport()
        let url = server.url + "/v1/projects/p/messages:send"
        for _ in 0..<3 {
            let answer = try await transport.send(OutgoingRequest(url: url, headers: [], body: Array("{}".utf8)), timeout: .seconds(10))
            #expect(answer.status == 200)
            #expect(String(decoding: answer.body, as: UTF8.self) == HTTP2TestServer.answer)
        }
        #expect(transport.http1Origins.withLock { $0.count } == 1)
        try await transport.shutdown()
    }

    @Test("nothing listening: a connection error at once (not lost in transit, not a wait for the deadline)")
    func refused() async throws {
        let transport = try Self.transport()
        let port = try HTTP2TestServer.freePort()
        let start = ContinuousClock.now
        do throws(TransportError) {
            _ = try await transport.send(OutgoingRequest(url: "https://127.0.0.1:\(port)/v1", headers: [], body: []), timeout: .seconds(30))
            Issue.record("answered")
        } catch {
            #expect(!error.lostInTransit)
            #expect(error.description.contains("cannot connect"), "\(error)")
        }
        #expect(ContinuousClock.now - start < .seconds(10))
        try await transport.shutdown()
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
                    app: "toto", subscriptionHandle: 1, subscriptionID: "s", kind: .mobile, target: token, destination: nil, notification: .value,
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
