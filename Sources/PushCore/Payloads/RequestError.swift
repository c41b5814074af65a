/// A request that cannot be served: a subscription document, a payload request, an
/// `encryption` block, a data payload read back. Its ``kind`` says what sort of fault (compare
/// with the static members); its ``message`` says what and where, the field first
/// (`context.endpoint: 3000 bytes; at most 2048`), and what was expected. Messages echo inputs
/// cut short and never a key or a secret.
public struct RequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What sort of fault, as a closed set (a stable name each).
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: String {
            case missing
            case invalid
            case tooLarge = "too_large"
            case unsupported
            case notConfigured = "not_configured"
            case undecodable
        }

        private let code: Code

        private init(_ code: Code) { self.code = code }

        /// A required field is absent.
        public static let missing = Kind(.missing)
        /// A field has the wrong type, or a value outside what is accepted.
        public static let invalid = Kind(.invalid)
        /// A field over its size bound.
        public static let tooLarge = Kind(.tooLarge)
        /// An algorithm, or a key id, the service does not have.
        public static let unsupported = Kind(.unsupported)
        /// Asks for what the application (or the command) is not configured for: a provider it
        /// does not send through, a webhook it does not have, keys it was not given.
        public static let notConfigured = Kind(.notConfigured)
        /// Not JSON, or not what it claims to be: a line that does not parse, a data payload
        /// that does not read as one of the service's (PushJOSE's decoder).
        public static let undecodable = Kind(.undecodable)

        /// The kind's stable name (`too_large`).
        public var description: String { code.rawValue }
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
