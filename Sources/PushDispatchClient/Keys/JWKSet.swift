import Foundation
import PushJOSE

extension JWK {
    /// The keys of a JWK Set (RFC 7517 §5, `{"keys":[…]}`): how an application's shared keys
    /// (``PushDispatch/Configuration/sharedKeys``) are usually handed to its apps. Throws
    /// ``PushClientError/Code/invalidArgument`` saying what is wrong with the set (never a key's
    /// material).
    public static func keys(inJWKSet document: Data) throws(PushClientError) -> [JWK] {
        do {
            return try KeyRing(jwkSetText: [UInt8](document)).keys
        } catch {
            throw .invalidArgument("the JWK Set: \(error)")
        }
    }
}
