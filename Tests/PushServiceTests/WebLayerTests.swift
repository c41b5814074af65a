import Foundation
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import PushAPI
import PushCore
import PushJSON
@testable import PushService
import PushFakes
import PushTestSupport
import Testing

/// What the web layer answers on its own, before any route: every error has the JSON body of
/// SPEC §5, and no client can hold a connection for ever.
@Suite("The web layer's own answers and deadlines", .serialized, .processLevel)
struct WebLayerTests {
    /// Short deadlines, for the tests about deadlines.
    static let short = ConnectionLimits(headTimeout: .milliseconds(500), requestTimeout: .milliseconds(1000), maxHeadBytes: 8 * 1024)
    /// Deadlines a loaded test machine cannot reach, for the other tests.
    static let relaxed = ConnectionLimits(headTimeout: .seconds(20), requestTimeout: .seconds(20), maxHeadBytes: 8 * 1024)

    func withService(limits: ConnectionLimits = WebLayerTests.relaxed, _ body: (ServiceHarness) async throws -> Void) async throws {
        let service = try ServiceHarness(limits: limits)
        try await service.start()
        do {
            try await body(service)
        } catch {
            await service.shutdown()
            throw error
        }
        await service.shutdown()
    }

    /// Sends `request` raw and returns the answer's status and body (JSON). The socket calls
    /// block: they run on a thread of their own, not on the few that run tasks (the service in
    /// this process needs those).
    func exchange(_ service: ServiceHarness, _ request: String, wait: Double = 60) async throws -> (status: Int, json: JSON?, closed: Bool) {
        let port = service.port
        let (text, closed) = try await onThread { () -> (String, Bool) in
            let connection = try RawConnection(port: port)
            connection.send(request)
            var (text, closed) = connection.receiveAll(timeout: 0.2)
            let end = Date().addingTimeInterval(wait)
            while !closed && RawConnection.parse(text).map({ $0.body.isEmpty }) != false && Date() < end {
                let more = connection.receiveAll(timeout: 0.2)
                text += more.text
                closed = more.closed
            }
            return (text, closed)
        }
        guard let (status, body) = RawConnection.parse(text) else { return (0, nil, closed) }
        return (status, try? JSONParser.parse(body), closed)
    }

    func expectJSONError(_ answer: (status: Int, json: JSON?, closed: Bool), status: Int, code: String) {
        #expect(answer.status == status)
        #expect(answer.json?["error"]?.stringValue == code, "body: \(String(describing: answer.json))")
        #expect(answer.json?["message"]?.stringValue?.isEmpty == false)
    }

    @Test("a huge header and a huge URL are answered 431 with a JSON body")
    func oversizedHeads() async throws {
        try await withService { service in
            let header = String(repeating: "a", count: 1 << 20)
            expectJSONError(
                try await exchange(service, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(header)\r\n\r\n"), status: 431,
                code: "request_header_fields_too_large")
            let path = "/" + String(repeating: "p", count: 100_000)
            expectJSONError(try await exchange(service, "GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n"), status: 431, code: "request_header_fields_too_large")
        }
    }

    @Test("an unknown method is 400 and a method a resource does not serve is 405, both JSON")
    func methods() async throws {
        try await withService { service in
            expectJSONError(try await exchange(service, "FROB /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), status: 400, code: "bad_request")
            expectJSONError(
                try await exchange(service, "POST /datasync/v2/toto/subscriptions/u1/abc HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"),
                status: 405, code: "method_not_allowed")
            expectJSONError(
                try await exchange(service, "PATCH /datasync/v2/toto/subscriptions/u1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"),
                status: 405, code: "method_not_allowed")
        }
    }

    @Test("a broken request line is 400 with a JSON body")
    func brokenRequestLine() async throws {
        try await withService { service in
            expectJSONError(try await exchange(service, "GET /healthz HTTP/9\r\n\r\n"), status: 400, code: "bad_request")
            expectJSONError(try await exchange(service, "\u{1}\u{2}garbage\r\n\r\n"), status: 400, code: "bad_request")
        }
    }

    @Test("a malformed chunked body is 400, not 500")
    func malformedChunk() async throws {
        try await withService { service in
            let token = try service.token()
            let request = """
                POST /datasync/v2/toto/subscriptions/u1 HTTP/1.1\r
                Host: x\r
                Authorization: Bearer \(token)\r
                Content-Type: application/json\r
                Transfer-Encoding: chunked\r
                \r
                zz\r
                {}\r
                0\r
                \r

                """
            expectJSONError(try await exchange(service, request), status: 400, code: "bad_request")
        }
    }

    @Test("an idle connection is answered 408 and closed after the head deadline")
    func idle() async throws {
        try await withService(limits: Self.short) { service in
            let port = service.port
            let (text, closed, elapsed) = try await onThread { () -> (String, Bool, Double) in
                let connection = try RawConnection(port: port)
                let start = Date()
                let (text, closed) = connection.receiveAll(timeout: 30)
                return (text, closed, Date().timeIntervalSince(start))
            }
            #expect(closed)
            #expect(elapsed >= 0.3, "closed after \(elapsed) s")
            let answer = RawConnection.parse(text)
            #expect(answer?.status == 408)
            #expect((try? JSONParser.parse(answer?.body ?? ""))?["error"]?.stringValue == "request_timeout")
        }
    }

    @Test("a client sending its head byte by byte is cut off at the head deadline")
    func slowHead() async throws {
        try await withService(limits: Self.short) { service in
            let port = service.port
            let (status, open, elapsed) = try await onThread { () -> (Int?, Bool, Double) in
                let connection = try RawConnection(port: port)
                let start = Date()
                var open = connection.send("GET /healthz HTTP/1.1\r\n")
                for i in 0..<300 where open {
                    Thread.sleep(forTimeInterval: 0.1)
                    open = connection.send("X-Slow-\(i): 1\r\n")
                    if Date().timeIntervalSince(start) > 2, connection.receiveAll(timeout: 0.01).closed { open = false }
                }
                let (text, _) = connection.receiveAll(timeout: 2)
                return (RawConnection.parse(text)?.status, open, Date().timeIntervalSince(start))
            }
            #expect(!open || status == 408)
            #expect(elapsed < 25, "the slow client held on for \(elapsed) s")
        }
    }

    @Test("a client that never finishes its body is disconnected at the request deadline")
    func slowBody() async throws {
        try await withService(limits: Self.short) { service in
            let port = service.port
            let token = try service.token()
            let (closed, elapsed) = try await onThread { () -> (Bool, Double) in
                let connection = try RawConnection(port: port)
                connection.send(
                    "POST /datasync/v2/toto/subscriptions/u1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"kind\":")
                let start = Date()
                let (_, closed) = connection.receiveAll(timeout: 30)
                return (closed, Date().timeIntervalSince(start))
            }
            #expect(closed)
            #expect(elapsed < 25)
        }
    }

    @Test("past http.maxConnections a connection is answered 503 at once and closed; the ones held keep working; one closed frees a place (issue 33)")
    func connectionCap() async throws {
        var limits = Self.relaxed
        limits.maxConnections = 3
        try await withService(limits: limits) { service in
            let port = service.port
            let (held, refused, elapsed, afterwards) = try await onThread { () -> ([RawConnection], String, Double, String) in
                // Three slow clients: connected, sending nothing.
                var first: RawConnection? = try RawConnection(port: port)
                let held = try (0..<2).map { _ in try RawConnection(port: port) }
                Thread.sleep(forTimeInterval: 0.3)
                let start = Date()
                let extra = try RawConnection(port: port)
                extra.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                let (refused, _) = extra.receiveAll(timeout: 10)
                let elapsed = Date().timeIntervalSince(start)
                // One held connection is used, then closed: its place is free again.
                first?.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                let served = first?.receiveAll(timeout: 10).text ?? ""
                #expect(RawConnection.parse(served)?.status == 200, "a connection within the bound is served: \(served)")
                first = nil
                Thread.sleep(forTimeInterval: 0.3)
                let again = try RawConnection(port: port)
                again.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return (held, refused, elapsed, again.receiveAll(timeout: 10).text)
            }
            let answer = RawConnection.parse(refused)
            #expect(answer?.status == 503, "\(refused)")
            #expect(refused.lowercased().contains("retry-after: 1"))
            #expect((try? JSONParser.parse(answer?.body ?? ""))?["error"]?.stringValue == "unavailable")
            #expect(elapsed < 5, "refused after \(elapsed) s")
            #expect(RawConnection.parse(afterwards)?.status == 200, "\(afterwards)")
            let metrics = try await service.send(.GET, "/metrics", token: nil)
            #expect(metrics.body.contains("pushdispatch_api_connections_refused_total 1"), "\(metrics.body)")
            withExtendedLifetime(held) {}
        }
    }

    @Test("a keep-alive connection serves several requests within the deadlines")
    func keepAlive() async throws {
        try await withService { service in
            let port = service.port
            let statuses = try await onThread { () -> [Int?] in
                let connection = try RawConnection(port: port)
                var statuses: [Int?] = []
                for _ in 0..<3 {
                    connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    var text = ""
                    let end = Date().addingTimeInterval(30)
                    while !text.contains("{\"status\":\"ok\"}") && Date() < end {
                        text += connection.receiveAll(timeout: 0.1).text
                    }
                    statuses.append(RawConnection.parse(text)?.status)
                    Thread.sleep(forTimeInterval: 0.2)
                }
                return statuses
            }
            #expect(statuses == [200, 200, 200])
        }
    }
}

@Suite("The web layer under pipelining and stuck clients", .serialized, .processLevel)
struct WebLayerPipeliningTests {
    func withService(limits: ConnectionLimits, _ body: (ServiceHarness) async throws -> Void) async throws {
        let service = try ServiceHarness(limits: limits)
        try await service.start()
        do {
            try await body(service)
        } catch {
            await service.shutdown()
            throw error
        }
        await service.shutdown()
    }

    @Test("garbage after a pipelined request, and CONNECT, get JSON answers")
    func pipelinedGarbage() async throws {
        try await withService(limits: WebLayerTests.relaxed) { service in
            let port = service.port
            let (text, reply, replyClosed) = try await onThread { () -> (String, String, Bool) in
                let connection = try RawConnection(port: port)
                connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n")
                var text = ""
                var closed = false
                let end = Date().addingTimeInterval(60)
                while !closed && Date() < end {
                    let more = connection.receiveAll(timeout: 0.2)
                    text += more.text
                    closed = more.closed
                }
                let connect = try RawConnection(port: port)
                connect.send("CONNECT /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                var reply = ""
                var done = false
                let deadline = Date().addingTimeInterval(60)
                while !done && Date() < deadline {
                    let more = connect.receiveAll(timeout: 0.2)
                    reply += more.text
                    done = more.closed
                }
                return (text, reply, done)
            }
            let responses = text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { "HTTP/1.1 " + $0 }
            #expect(responses.count == 2, "\(text)")
            #expect(RawConnection.parse(responses.first ?? "")?.status == 200)
            let second = RawConnection.parse(responses.last ?? "")
            #expect(second?.status == 400)
            #expect((try? JSONParser.parse(second?.body ?? ""))?["error"] == "bad_request", "\(String(describing: second))")
            // After a CONNECT head, no HTTP answer can follow (the codec takes the rest for a
            // tunnel): the connection is closed at once.
            #expect(replyClosed && reply.isEmpty, "\(reply)")
        }
    }

    @Test("a client that sends thousands of requests and never reads is disconnected after the deadlines")
    func stuckReader() async throws {
        let limits = ConnectionLimits(headTimeout: .milliseconds(500), requestTimeout: .milliseconds(1000), maxHeadBytes: 8 * 1024)
        try await withService(limits: limits) { service in
            let port = service.port
            let (closed, sent, received) = try await onThread { () -> (Bool, Int, Int) in
                let connection = try RawConnection(port: port, receiveBuffer: 4096)
                let bytes = Array(String(repeating: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", count: 20_000).utf8)
                var sent = 0
                // Send without reading, until the server stops reading (the socket buffers fill).
                while sent < bytes.count {
                    var poller = pollfd(fd: connection.descriptor, events: Int16(POLLOUT), revents: 0)
                    if poll(&poller, 1, 500) <= 0 { break }
                    let count = bytes[sent...].withUnsafeBytes {
                        Glibc.send(connection.descriptor, $0.baseAddress, min($0.count, 65_536), Int32(MSG_NOSIGNAL))
                    }
                    if count <= 0 { break }
                    sent += count
                }
                Thread.sleep(forTimeInterval: 3)  // deadlines: 0.5 s head, 1 s request, 1 s to flush
                // Now read what is there: the connection must end (closed or reset), not stay open.
                let start = Date()
                var closed = false
                var received = 0
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while !closed && Date().timeIntervalSince(start) < 30 {
                    var poller = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
                    if poll(&poller, 1, 500) <= 0 { continue }
                    let count = buffer.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress, $0.count, 0) }
                    if count <= 0 { closed = true } else { received += count }
                }
                return (closed, sent, received)
            }
            #expect(closed, "the connection was still open (sent \(sent) bytes, received \(received))")
        }
    }
}
