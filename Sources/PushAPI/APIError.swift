import Hummingbird
import PushCore
import PushJSON

/// A deliberate error response: `{"error":"<code>","message":"<human text>"}` (SPEC §5), with
/// its status and headers. Clients act on ``code``; ``message`` says what was wrong, where, and
/// what was expected.
public struct APIError: HTTPResponseError, Sendable, Equatable {
    /// The `error` field: a fixed set of codes, compared with the static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let text: String

        private init(_ text: String) {
            self.text = text
        }

        /// A bad document, path or query (400).
        public static let badRequest = Code("bad_request")
        /// No or a bad token (401).
        public static let unauthorized = Code("unauthorized")
        /// A valid token for another user or application (403).
        public static let forbidden = Code("forbidden")
        /// The read rules do not let the token's user read the node (403, SPEC §12).
        public static let permissionDenied = Code("permission_denied")
        /// No such subscription, route or application (404).
        public static let notFound = Code("not_found")
        /// A method the resource does not serve (405).
        public static let methodNotAllowed = Code("method_not_allowed")
        /// The subscription exists already (409).
        public static let conflict = Code("conflict")
        /// 429: the user has as many subscriptions as `subscriptions.maxPerUser` allows.
        public static let tooManySubscriptions = Code("too_many_subscriptions")
        /// The body is larger than the limit (413).
        public static let payloadTooLarge = Code("payload_too_large")
        /// The body is not `application/json` (415).
        public static let unsupportedMediaType = Code("unsupported_media_type")
        /// The store is busy: try again (503).
        public static let unavailable = Code("unavailable")
        /// A failure of the service, logged (500).
        public static let internalError = Code("internal_error")

        /// The code of another client error status (408, 411, 431…): its reason phrase in snake
        /// case (`request_timeout`).
        static func status(_ status: HTTPResponse.Status) -> Code {
            Code(status.reasonPhrase.lowercased().split { !$0.isLetter }.joined(separator: "_"))
        }

        public var description: String { text }
    }

    public let status: HTTPResponse.Status
    public let code: Code
    public let message: String
    public let headers: HTTPFields

    public init(_ status: HTTPResponse.Status, _ code: Code, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public static func badRequest(_ message: String) -> APIError { APIError(.badRequest, .badRequest, message) }
    public static func notFound(_ message: String) -> APIError { APIError(.notFound, .notFound, message) }
    public static func forbidden(_ message: String) -> APIError { APIError(.forbidden, .forbidden, message) }
    public static func conflict(_ message: String) -> APIError { APIError(.conflict, .conflict, message) }

    /// 401, with the `WWW-Authenticate` challenge of RFC 6750.
    public static func unauthorized(_ message: String, invalidToken: Bool) -> APIError {
        let challenge = invalidToken ? "Bearer realm=\"pushdispatch\", error=\"invalid_token\"" : "Bearer realm=\"pushdispatch\""
        return APIError(.unauthorized, .unauthorized, message, headers: [.wwwAuthenticate: challenge])
    }

    public static let payloadTooLarge = APIError(
        .contentTooLarge, .payloadTooLarge, "the request body is larger than \(SubscriptionAPI.maxBodyBytes) bytes")

    public static let internalError = APIError(.internalServerError, .internalError, "internal error; the service logged it")

    /// Equal when of the same status and code (the message is for people).
    public static func == (lhs: APIError, rhs: APIError) -> Bool { lhs.status == rhs.status && lhs.code == rhs.code }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var body = JSONWriter(capacity: 128)
        body.raw("{\"error\":")
        body.writeString(code.description)
        body.raw(",\"message\":")
        body.writeString(message)
        body.raw("}")
        var response = Response.json(status: status, body.bytes)
        for field in headers { response.headers.append(field) }
        return response
    }
}

extension Response {
    /// A JSON response from compact JSON bytes.
    static func json(status: HTTPResponse.Status, _ bytes: [UInt8], headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "application/json"
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A JSON response from a value (compact, SPEC §7.1).
    static func json(status: HTTPResponse.Status = .ok, _ value: JSON, headers: HTTPFields = [:]) -> Response {
        var writer = JSONWriter(capacity: 512)
        writer.write(value)
        return json(status: status, writer.bytes, headers: headers)
    }
}
