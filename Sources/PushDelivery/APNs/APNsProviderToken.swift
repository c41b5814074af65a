import Crypto
import Foundation
import PushCore
import PushJSON
import PushJOSE
import Synchronization

/// The APNs provider authentication token of one application (token-based auth): a JWT signed
/// with the team's `.p8` key (ES256), header `{"alg":"ES256","kid":<key id>}`, claims
/// `{"iss":<team id>,"iat":<seconds>}`, shared by every send.
///
/// APNs refuses a token older than an hour (`403 ExpiredProviderToken`) and one renewed more
/// often than every 20 minutes (`429 TooManyProviderTokenUpdates`, counted per team): the token
/// is renewed once it is ``renewalAge`` old (50 minutes), and never before ``minimumAge``
/// (20 minutes), not even when APNs says it expired (a clock out of step: the sends wait for
/// their back-off instead).
public final class APNsProviderToken: Sendable {
    /// Renewed at this age (seconds): between APNs's 20 and 60 minutes, away from both.
    public static let renewalAge: Int64 = 50 * 60
    /// Never renewed younger than this (seconds).
    public static let minimumAge: Int64 = 20 * 60

    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    struct Minted {
        var token: String
        var issuedAt: Int64
    }

    public let teamID: String
    public let keyID: String
    let privateKey: P256.Signing.PrivateKey
    let encodedHeader: [UInt8]
    let minted = Mutex<Minted?>(nil)

    /// - Parameters:
    ///   - teamID, keyID: Apple's 10-character identifiers (upper-case letters and digits).
    ///   - privateKeyPEM: the `.p8` file's text (a PKCS #8 P-256 key).
    public init(teamID: String, keyID: String, privateKeyPEM: String) throws(Invalid) {
        for (name, value) in [("teamId", teamID), ("keyId", keyID)] {
            guard value.utf8.count == 10, value.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            else { throw Invalid(description: "apns.\(name): expected Apple's 10 upper-case letters and digits, got \(value.utf8.count) characters") }
        }
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        } catch {
            throw Invalid(description: "apns.privateKey: not a PEM P-256 private key (an APNs .p8 file)")
        }
        self.teamID = teamID
        self.keyID = keyID
        var header = JSONWriter(capacity: 48)
        header.raw("{\"alg\":\"ES256\",\"kid\":")
        header.writeString(keyID)
        header.raw("}")
        encodedHeader = Base64URL.encode(header.bytes)
    }

    /// When the token in use was signed (seconds since the epoch); `nil` before the first send.
    public var issuedAt: Int64? { minted.withLock { $0?.issuedAt } }

    /// The token to send at `now` (seconds since the epoch): the current one, or a new one once
    /// the current one is ``renewalAge`` old (or from the future: the clock went back).
    public func current(now: Int64) throws(Invalid) -> String {
        let seen = minted.withLock { $0 }
        if let seen, seen.issuedAt <= now, now.saturatingSubtracting(seen.issuedAt) < Self.renewalAge {
            return seen.token
        }
        // Sends renewing at once make one token: the first stored wins.
        return try mint(now: now, unless: seen?.token ?? "")
    }

    /// APNs answered `ExpiredProviderToken` to `token`: a new one, unless that token is younger
    /// than ``minimumAge`` (renewing would be refused as too frequent) or was already replaced
    /// (another send renewed it: that one is returned).
    public func renew(after token: String, now: Int64) throws(Invalid) -> String? {
        guard let minted = minted.withLock({ $0 }) else { return try mint(now: now, unless: "") }
        if minted.token != token { return minted.token }
        guard minted.issuedAt > now || now.saturatingSubtracting(minted.issuedAt) >= Self.minimumAge else { return nil }
        return try mint(now: now, unless: token)
    }

    /// Signs a token issued at `now` and keeps it, unless the token kept is no longer `replaced`
    /// (the one the caller saw, `""` for none): then another send renewed it meanwhile, and
    /// that one is returned.
    func mint(now: Int64, unless replaced: String) throws(Invalid) -> String {
        var input = encodedHeader
        input.append(UInt8(ascii: "."))
        var claims = JSONWriter(capacity: 64)
        claims.raw("{\"iss\":")
        claims.writeString(teamID)
        claims.raw(",\"iat\":")
        claims.writeInt(now)
        claims.raw("}")
        input += Base64URL.encode(claims.bytes)
        let signature: [UInt8]
        do {
            signature = [UInt8](try privateKey.signature(for: input).rawRepresentation)
        } catch {
            throw Invalid(description: "apns.privateKey cannot sign: \(error)")
        }
        input.append(UInt8(ascii: "."))
        input += Base64URL.encode(signature)
        let token = String(decoding: input, as: UTF8.self)
        return minted.withLock { minted in
            if let current = minted, current.token != replaced { return current.token }
            minted = Minted(token: token, issuedAt: now)
            return token
        }
    }
}
