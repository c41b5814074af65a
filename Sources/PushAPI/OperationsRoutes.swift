import HTTPTypes
import Hummingbird
import NIOCore
import PushCore
import PushJSON

/// What the operator's endpoints read: the service's metrics as Prometheus text and its
/// status document (SPEC §11.13).
public protocol OperationsReport: Sendable {
    /// The Prometheus text exposition, gauges read now.
    func metrics() async -> [UInt8]
    /// The `/status` document.
    func status() async -> JSON
}

/// `/metrics` and `/status`, behind the operations token when one is configured; without one,
/// open on a loopback address only (SPEC §13.1).
public struct OperationsRoutes: Sendable {
    let report: any OperationsReport
    /// `http.operationsToken`: required of `/metrics` and `/status` when set.
    let token: String?
    /// Where the service listens (`http.host`), for the refusal without a token.
    let host: String
    /// Whether `host` is a loopback address: then, without a token, the routes stay open.
    let loopback: Bool
    /// The console's sessions: a request with a live session's cookie passes as the token does
    /// (a state-changing one only with the session's `X-CSRF-Token`).
    let sessions: ConsoleSessions?

    public init(report: any OperationsReport, token: String?, host: String, loopback: Bool, sessions: ConsoleSessions? = nil) {
        self.report = report
        self.token = token
        self.host = host
        self.loopback = loopback
        self.sessions = sessions
    }

    /// The 403 of a service without an operations token listening beyond loopback; `nil`
    /// otherwise.
    func closed() -> Response? {
        guard token == nil, !loopback else { return nil }
        let message =
            "http.operationsToken is not set and the service listens on \(host), not a loopback address: set it "
            + "(16 or more printable characters; or PUSHDISPATCH_HTTP_OPERATIONSTOKEN) and send Authorization: Bearer <token>"
        return .json(status: .forbidden, ["error": "forbidden", "message": .string(message)])
    }

    public func add(to router: Router<BasicRequestContext>) {
        router.get("metrics") { request, _ in
            if let refusal = refusal(request) { return refusal }
            let text = await report.metrics()
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        router.get("status") { request, _ in
            if let refusal = refusal(request) { return refusal }
            var writer = JSONWriter(capacity: 2048)
            writer.write(await report.status())
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
        }
    }

    /// A 401 unless the request carries the operations token (when one is configured); a 403
    /// for every request when none is configured and the service listens beyond loopback. The
    /// comparison takes the same time wherever the tokens differ.
    func refusal(_ request: Request) -> Response? {
        guard let token else { return closed() }
        if let sessions, let (_, session) = sessions.session(request) {
            if request.method == .get || request.method == .head { return nil }
            let given = request.headers[HTTPField.Name("X-CSRF-Token")!].map { Array($0.utf8) } ?? []
            if Self.same(given, Array(session.csrf.utf8)) { return nil }
            return .json(
                status: .forbidden,
                ["error": "forbidden", "message": "a console request that changes something needs the session's X-CSRF-Token header"])
        }
        let given = request.headers[.authorization].flatMap { value -> Substring? in
            guard value.count > 7, value.prefix(7).lowercased() == "bearer " else { return nil }
            return value.dropFirst(7)
        }
        if let given, Self.same(Array(given.utf8), Array(token.utf8)) { return nil }
        let message =
            given == nil
            ? "this endpoint needs the operations token: Authorization: Bearer <http.operationsToken>"
            : "the operations token is not the one configured (http.operationsToken)"
        var headers = HTTPFields()
        headers[.wwwAuthenticate] = given == nil ? "Bearer realm=\"pushdispatch-operations\"" : "Bearer realm=\"pushdispatch-operations\", error=\"invalid_token\""
        return .json(status: .unauthorized, ["error": "unauthorized", "message": .string(message)], headers: headers)
    }

    /// Equal bytes, compared in a time that depends on the lengths only.
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0 && a.count == b.count
    }
}
