import Hummingbird
import PushCore

/// A deliberate error response: `{"error":"<code>","message":"<human text>"}` (SPEC §5).
public struct APIError: HTTPResponseError, Sendable {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    public let headers: HTTPFields

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public static func badRequest(_ message: String) -> APIError { APIError(.badRequest, "bad_request", message) }
    public static func notFound(_ message: String) -> APIError { APIError(.notFound, "not_found", message) }
    public static func forbidden(_ message: String) -> APIError { APIError(.forbidden, "forbidden", message) }
    public static func conflict(_ message: String) -> APIError { APIError(.conflict, "conflict", message) }

    /// 401, with the `WWW-Authenticate` challenge of RFC 6750.
    public static func unauthorized(_ message: String, invalidToken: Bool) -> APIError {
        let challenge = invalidToken ? "Bearer realm=\"pushdispatch\", error=\"invalid_token\"" : "Bearer realm=\"pushdispatch\""
        return APIError(.unauthorized, "unauthorized", message, headers: [.wwwAuthenticate: challenge])
    }

    public static let payloadTooLarge = APIError(
        .contentTooLarge, "payload_too_large", "the request body is larger than \(SubscriptionAPI.maxBodyBytes) bytes")

    public static let internalError = APIError(.internalServerError, "internal_error", "internal error; the service logged it")

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var body = JSONWriter(capacity: 128)
        body.raw("{\"error\":")
        body.writeString(code)
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
