/// Why a request to pushdispatch failed: what the server answered (its `error` code and
/// message), or what went wrong before an answer came.
///
/// Compare ``code`` with the static members: `catch let error as PushClientError where
/// error.code == .permissionDenied`. The HTTP status is kept as context only; the code is what
/// says what happened. Messages never contain a bearer token or a key.
public struct PushClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What happened: the server's `error` code, or one of the client's own codes. An open set:
    /// a code the server adds later is kept as it was written.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The code's text, as the server writes it (`permission_denied`).
        public let name: String

        /// A code by its text.
        public init(_ name: String) {
            self.name = name
        }

        /// 400: the server refused the document, path or query; the message names the field.
        public static let badRequest = Code("bad_request")
        /// 401: no token, or one the server does not accept (expired, another application's…),
        /// even after asking the token provider for a fresh one.
        public static let unauthorized = Code("unauthorized")
        /// 403: a valid token for another user.
        public static let forbidden = Code("forbidden")
        /// 403: the application's read rules do not let this user read the node.
        public static let permissionDenied = Code("permission_denied")
        /// 404: no such subscription (or application).
        public static let notFound = Code("not_found")
        /// 405: the server does not serve this method here.
        public static let methodNotAllowed = Code("method_not_allowed")
        /// 409: the subscription exists already and the descriptor does not allow an update.
        public static let conflict = Code("conflict")
        /// 413: the request body is larger than the server accepts.
        public static let payloadTooLarge = Code("payload_too_large")
        /// 415: the server wanted another content type.
        public static let unsupportedMediaType = Code("unsupported_media_type")
        /// 429: the user has as many subscriptions as the application allows.
        public static let tooManySubscriptions = Code("too_many_subscriptions")
        /// 503: the server is busy; try again later.
        public static let unavailable = Code("unavailable")
        /// 500: a failure of the server (it logged it).
        public static let internalError = Code("internal_error")

        /// An argument the client refused before sending anything (a bad path, device token,
        /// descriptor or base URL).
        public static let invalidArgument = Code("invalid_argument")
        /// No answer: the connection failed or the request's deadline passed.
        public static let transport = Code("transport")
        /// An answer that is not what the REST API answers (not JSON, a document without id…).
        public static let invalidResponse = Code("invalid_response")
        /// The app's token provider failed.
        public static let credentials = Code("credentials")
        /// The device key could not be read, made or kept by the key store.
        public static let keyStore = Code("key_store")
        /// Some subscriptions could not be moved to the new device token (see the message).
        public static let partialUpdate = Code("partial_update")
        /// The offline queue holds as many operations as its limit allows
        /// (``OfflineQueueConfiguration/limit``): the operation was not queued.
        public static let queueFull = Code("queue_full")
        /// The offline queue's file could not be read or written (the message says which and
        /// why); an unreadable file is left as it is until ``OfflineQueue/discardAll()``.
        public static let queueStore = Code("queue_store")
        /// A queued operation was for another user than the one the credentials now name (the
        /// user signed out, another signed in): it is not sent.
        public static let userChanged = Code("user_changed")

        /// The code's text.
        public var description: String { name }
    }

    /// What happened.
    public let code: Code
    /// A message a person can act on: the server's own message, or the client's.
    public let message: String
    /// The HTTP status of the answer, when there was one (context only).
    public let status: Int?
    /// Set when the request certainly never reached the service (no connection could be
    /// made): the offline queue then knows the operation was not applied.
    var neverSent = false
    /// Set when the answer carried no error body of the service's (a proxy's page): its status
    /// alone chose the code.
    var bare = false

    /// An error with its code, message and optional HTTP status.
    public init(_ code: Code, _ message: String, status: Int? = nil) {
        self.code = code
        self.message = Bounded.text(message, limit: 600)
        self.status = status
    }

    /// Equal when the codes are equal (the message is for people).
    public static func == (lhs: PushClientError, rhs: PushClientError) -> Bool {
        lhs.code == rhs.code
    }

    /// The code, the message and the HTTP status.
    public var description: String {
        status.map { "\(code.name): \(message) (HTTP \($0))" } ?? "\(code.name): \(message)"
    }

    static func invalidArgument(_ message: String) -> PushClientError {
        PushClientError(.invalidArgument, message)
    }

    static func invalidResponse(_ message: String, status: Int? = nil) -> PushClientError {
        PushClientError(.invalidResponse, message, status: status)
    }
}
