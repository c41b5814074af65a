import PushCore
import PushJSON

/// Why a JOSE operation failed, named so that a person can act on it.
public struct JOSEError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// Not a well-formed compact serialisation, header or payload.
        case malformedToken(String)
        /// An algorithm we do not implement, or refuse (`none`).
        case unsupportedAlgorithm(String)
        /// No key with this id in the key set.
        case unknownKeyID(String)
        /// The signature does not verify with the key named by the token.
        case badSignature
        /// Decryption failed: the key is not the one the token was encrypted to, or the token
        /// was altered.
        case wrongKey(String)
        /// The key exists but cannot be used with this algorithm.
        case keyMismatch(String)
        /// A JWK or JWK Set is not valid.
        case invalidKey(String)
    }

    public let code: Code

    public init(_ code: Code) {
        self.code = code
    }

    public static func malformed(_ reason: String) -> JOSEError { JOSEError(.malformedToken(reason)) }
    public static func invalidKey(_ reason: String) -> JOSEError { JOSEError(.invalidKey(reason)) }
    public static func mismatch(_ reason: String) -> JOSEError { JOSEError(.keyMismatch(reason)) }
    public static func wrongKey(_ reason: String) -> JOSEError { JOSEError(.wrongKey(reason)) }

    public var description: String {
        switch code {
        case .malformedToken(let reason): return "malformed token: \(reason)"
        case .unsupportedAlgorithm(let alg): return "unsupported algorithm \(quote(alg))"
        case .unknownKeyID(let kid): return "unknown kid \(quote(kid))"
        case .badSignature: return "bad signature"
        case .wrongKey(let reason): return "wrong key: \(reason)"
        case .keyMismatch(let reason): return "key does not fit: \(reason)"
        case .invalidKey(let reason): return "invalid key: \(reason)"
        }
    }
}

/// A string in double quotes, for messages.
func quote(_ text: String) -> String {
    JSONWriter.quoted(text)
}
