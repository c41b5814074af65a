/// Why a notification was refused: it is not one of this service's, it was altered or forged,
/// it cannot be decrypted, or the keys to check it could not be had.
///
/// Compare ``code`` with the static members. The message names what failed (as
/// `pushdispatch decode` does: `bad signature`, `unknown kid "…"`, `wrong key: …`); it never
/// holds a key or a secret, and echoes inputs cut short.
public struct NotificationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The code's name.
        public let name: String

        private init(_ name: String) {
            self.name = name
        }

        /// Not a data payload or webhook body of this service: not JSON, a missing or
        /// unexpected field, a value of the wrong type, a header the service never writes.
        public static let malformed = Code("malformed")
        /// The signature does not verify: the event was altered or forged.
        public static let badSignature = Code("bad_signature")
        /// No key has the `kid` the notification names, even after fetching the service's keys
        /// again (or a shared key the app did not configure).
        public static let unknownKey = Code("unknown_key")
        /// Decryption failed: encrypted to another key, or altered.
        public static let wrongKey = Code("wrong_key")
        /// An algorithm the service never uses (`none` among them).
        public static let unsupportedAlgorithm = Code("unsupported_algorithm")
        /// The key named cannot serve the algorithm named (an HS256 header naming an EC key…).
        public static let keyMismatch = Code("key_mismatch")
        /// A genuine event, but of another application: it was not meant for this one.
        public static let otherApplication = Code("other_application")
        /// The keys needed to check it could not be had (the service's keys could not be
        /// fetched, or the device key could not be read).
        public static let keysUnavailable = Code("keys_unavailable")
        /// A webhook request whose `webhook-signature` does not verify with the secret.
        public static let badWebhookSignature = Code("bad_webhook_signature")
        /// A webhook request whose `webhook-timestamp` is outside the tolerance (a replay).
        public static let staleWebhook = Code("stale_webhook")
        /// Larger than any notification of the service.
        public static let tooLarge = Code("too_large")

        /// The code's name.
        public var description: String { name }
    }

    /// What was wrong.
    public let code: Code
    /// What failed, for a person.
    public let message: String

    /// An error with its code and message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = Bounded.text(message, limit: 600)
    }

    /// Equal when the codes are equal (the message is for people).
    public static func == (lhs: NotificationError, rhs: NotificationError) -> Bool {
        lhs.code == rhs.code
    }

    /// The code and the message.
    public var description: String { "\(code.name): \(message)" }

    static func malformed(_ message: String) -> NotificationError {
        NotificationError(.malformed, message)
    }
}
