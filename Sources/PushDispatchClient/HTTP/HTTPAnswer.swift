import PushCore
import PushJSON

/// One answer of the service: its status, the headers the client reads, and the body.
struct HTTPAnswer: Sendable {
    var status: Int
    var contentLocation: String?
    var body: [UInt8]

    /// The body as JSON; `invalidResponse` when it is not.
    func json(_ what: String) throws(PushClientError) -> JSON {
        do {
            return try JSONParser.parse(body)
        } catch {
            throw .invalidResponse("\(what): the answer is not JSON (\(error))", status: status)
        }
    }

    /// The error this answer means: the server's `{"error":code,"message":…}` when it sent
    /// one, else a code chosen from the status alone (a proxy's page, an empty body).
    var error: PushClientError {
        if let json = try? JSONParser.parse(body), case .string(let code)? = json["error"], !code.isEmpty, code.utf8.count <= 64 {
            let message = json["message"]?.stringValue ?? "the service gave no message"
            return PushClientError(PushClientError.Code(code), message, status: status)
        }
        var error = PushClientError(Self.code(forStatus: status), "the service answered without an error body", status: status)
        error.bare = true
        return error
    }

    /// The code of an answer that carries none of its own.
    static func code(forStatus status: Int) -> PushClientError.Code {
        switch status {
        case 400: return .badRequest
        case 401: return .unauthorized
        case 403: return .forbidden
        case 404: return .notFound
        case 405: return .methodNotAllowed
        case 409: return .conflict
        case 413: return .payloadTooLarge
        case 415: return .unsupportedMediaType
        case 429: return .tooManySubscriptions
        case 502, 503, 504: return .unavailable
        case 500...599: return .internalError
        default: return .invalidResponse
        }
    }
}
