import HTTPTypes
import Hummingbird
import NIOCore
import PushCore
import PushJSON

/// The console at `/console` (SPEC §13.4): three files compiled into the service
/// (``ConsoleAssets``, from `console/`), served with a strict content security policy (nothing
/// from another origin, no inline script or style), and the sign-in that trades the operations
/// token for a session cookie (``ConsoleSessions``). Without an operations token the console is
/// open on a loopback bind and refused beyond it, as `/status` is.
public struct ConsoleRoutes: Sendable {
    let gate: OperationsRoutes
    let sessions: ConsoleSessions

    public init(gate: OperationsRoutes, sessions: ConsoleSessions) {
        self.gate = gate
        self.sessions = sessions
    }

    /// Every console answer carries these.
    static let policy =
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    static func headers(_ contentType: String) -> HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = contentType
        headers[.contentSecurityPolicy] = policy
        headers[.xContentTypeOptions] = "nosniff"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        return headers
    }

    public func add(to router: Router<BasicRequestContext>) {
        let files: [(String, String, String)] = [
            ("console", "text/html; charset=utf-8", ConsoleAssets.indexHTML),
            ("console/app.js", "text/javascript; charset=utf-8", ConsoleAssets.appJS),
            ("console/app.css", "text/css; charset=utf-8", ConsoleAssets.appCSS),
        ]
        for (path, type, text) in files {
            let bytes = ByteBuffer(string: text)
            router.get(RouterPath(path)) { _, _ -> Response in
                if let refusal = gate.closed() { return refusal }
                return Response(status: .ok, headers: Self.headers(type), body: .init(byteBuffer: bytes))
            }
        }
        router.get("console/session") { request, _ -> Response in
            if let refusal = gate.closed() { return refusal }
            if gate.token == nil { return Self.json(["signedIn": true, "open": true]) }
            guard let (_, session) = sessions.session(request) else { return Self.json(["signedIn": false]) }
            return Self.json(["signedIn": true, "csrf": .string(session.csrf)])
        }
        router.post("console/session") { request, _ -> Response in
            if let refusal = gate.closed() { return refusal }
            guard let token = gate.token else { return Self.json(["signedIn": true, "open": true]) }
            // `{"token": "…"}`, as the sign-in page sends it; any other body is a client's
            // mistake (415, 400), not a wrong token.
            let body = try await OperationsAPI.jsonBody(request)
            guard let given = body["token"]?.stringValue else {
                throw APIError.badRequest("token: required, a string (the operations token)")
            }
            guard OperationsRoutes.same(Array(given.utf8), Array(token.utf8)) else {
                var headers = HTTPFields()
                headers[.wwwAuthenticate] = "Bearer realm=\"pushdispatch-operations\", error=\"invalid_token\""
                return Self.json(
                    ["error": "unauthorized", "message": "the operations token is not the one configured (http.operationsToken)"], status: .unauthorized,
                    headers: headers)
            }
            let (id, csrf) = sessions.create()
            var headers = HTTPFields()
            headers[.setCookie] = ConsoleSessions.setCookie(id)
            return Self.json(["signedIn": true, "csrf": .string(csrf)], headers: headers)
        }
        router.delete("console/session") { request, _ -> Response in
            if let refusal = gate.closed() { return refusal }
            if let (id, session) = sessions.session(request), request.headers[HTTPField.Name("X-CSRF-Token")!] == session.csrf {
                sessions.remove(id)
            }
            var headers = HTTPFields()
            headers[.setCookie] = ConsoleSessions.setCookie(nil)
            return Self.json(["signedIn": false], headers: headers)
        }
    }

    static func json(_ value: JSON, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        var headers = Self.headers("application/json")
        for field in extra { headers.append(field) }
        return Response.json(status: status, value, headers: headers)
    }
}
