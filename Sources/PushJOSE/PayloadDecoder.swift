import PushCore
import PushJSON

/// Reads data payloads (v1 or v2) back into the event object of SPEC §7.3, verifying and
/// decrypting v2 `evt` tokens: the reverse of `pushdispatch payload`.
public struct PayloadDecoder: Sendable {
    /// Signing keys (to verify), application encryption keys and device private keys (to
    /// decrypt); `nil` when only v1 payloads are expected.
    public let keys: KeyRing?

    public init(keys: KeyRing?) {
        self.keys = keys
    }

    /// The event JSON of one data payload.
    public func decode(_ line: [UInt8]) throws -> [UInt8] {
        let json: JSON
        do {
            // A repeated field would be read differently by a reader that keeps the first one.
            json = try JSONParser.parseRejectingDuplicateKeys(line)
        } catch {
            throw RequestError(.undecodable, "the payload is not JSON: \(error)")
        }
        guard case .object(let payload) = json else {
            throw RequestError(.undecodable, "a data payload is a JSON object, got \(json.typeName)")
        }
        for (key, value) in payload {
            guard case .string = value else {
                throw RequestError(.undecodable, "data payload field \(quote(key.string)) is \(value.typeName); every value is a string")
            }
        }
        if payload[Key("ver")] == .string("v2") {
            return try decodeV2(payload)
        }
        var writer = JSONWriter(capacity: 512)
        let (event, status) = try V1Reader.event(payload)
        EventWriter.write(event, status: status, into: &writer)
        return writer.bytes
    }

    /// The fields of a v2 data payload (SPEC §7.3); `kid` only when `evt` is encrypted.
    static let v2Fields: Set<String> = ["srv", "kid", "evt", "ver"]

    /// Verifies and decrypts a v2 payload, as strictly as a device must:
    ///
    /// - `evt` as a JWS (not encrypted): the payload has no `kid` field; the header is exactly
    ///   `{"alg","kid"}`, the algorithm one we sign with (ES256, HS256, EdDSA), the key a signing
    ///   key of the set.
    /// - `evt` as a JWE: the payload's `kid` field is present and names the JWE's key.
    ///   Symmetric algorithms (`dir`, `A128KW`, `A256KW`): the header is exactly
    ///   `{"alg","enc","kid"}` and the plaintext is the event. Asymmetric ones (`ECDH-ES`,
    ///   `ECDH-ES+A256KW`, `RSA-OAEP-256`): anyone holding the device's *public* key can encrypt
    ///   to it, so the plaintext must be a JWS of the event signed by the service (`cty: "JWT"`),
    ///   and that signature is verified like a plain `evt`. Anything else is refused.
    private func decodeV2(_ payload: JSONObject) throws -> [UInt8] {
        for (key, _) in payload where !Self.v2Fields.contains(key.string) {
            throw RequestError(.undecodable, "v2 payload: unexpected field \(quote(key.string)); a v2 payload holds srv, kid (when encrypted), evt and ver")
        }
        guard payload[Key("srv")] == .string("webcom") else {
            throw RequestError(.undecodable, "v2 payload: srv must be \"webcom\"")
        }
        guard case .string(let evt)? = payload[Key("evt")] else {
            throw RequestError(.undecodable, "v2 payload: missing evt")
        }
        guard let keys else {
            throw RequestError(.notConfigured, "v2 payloads are signed or encrypted: pass --keys with the JWK Set")
        }
        let token = Array(evt.utf8)
        let dots = token.lazy.filter { $0 == UInt8(ascii: ".") }.count
        let payloadKID = payload[Key("kid")]?.stringValue
        let eventBytes: [UInt8]
        switch dots {
        case 2:
            if payloadKID != nil {
                throw JOSEError.malformed("the payload has a kid field but evt is a JWS, not a JWE")
            }
            eventBytes = try Self.verifyEventSignature(token, keys: keys, what: "evt")
        case 4:
            guard let payloadKID else {
                throw JOSEError.malformed("evt is a JWE but the payload has no kid field; an encrypted payload names its key in kid")
            }
            let decrypted = try JWE.decrypt(token, keys: keys)
            if payloadKID != decrypted.kid {
                throw JOSEError.malformed("the payload's kid \(quote(payloadKID)) differs from the JWE header's")
            }
            if decrypted.keyAlgorithm.isAsymmetric {
                let allowed: Set<String> = decrypted.keyAlgorithm == .rsaOAEP256
                    ? ["alg", "enc", "kid", "cty"] : ["alg", "enc", "kid", "cty", "epk"]
                try Self.requireOnly(allowed, in: decrypted.header, what: "the \(decrypted.keyAlgorithm.rawValue) JWE header")
                guard decrypted.contentType == "JWT" else {
                    throw JOSEError.malformed(
                        "\(decrypted.keyAlgorithm.rawValue) encrypts to the device's public key, which anyone may hold: "
                            + "its plaintext must be the service's signed JWS of the event (cty \"JWT\"), and this one has "
                            + (decrypted.contentType.map { "cty \(quote($0))" } ?? "no cty"))
                }
                eventBytes = try Self.verifyEventSignature(decrypted.plaintext, keys: keys, what: "the nested JWS")
            } else {
                try Self.requireOnly(["alg", "enc", "kid"], in: decrypted.header, what: "the \(decrypted.keyAlgorithm.rawValue) JWE header")
                eventBytes = decrypted.plaintext
            }
        default:
            throw JOSEError.malformed("evt is neither a compact JWS (3 parts) nor a compact JWE (5 parts)")
        }
        try Self.checkEvent(eventBytes)
        return eventBytes
    }

    /// The payload of a JWS of an event: signed with ES256, HS256 or EdDSA by a signing key of
    /// the set, header exactly `{"alg","kid"}`.
    static func verifyEventSignature(_ token: [UInt8], keys: KeyRing, what: String) throws(JOSEError) -> [UInt8] {
        let verified = try JWS.verify(token, keys: keys)
        if verified.algorithm == .rs256 {
            throw JOSEError(.unsupportedAlgorithm(verified.algorithm.rawValue))
        }
        try requireOnly(["alg", "kid"], in: verified.header, what: "the header of \(what)")
        return verified.payload
    }

    static func requireOnly(_ allowed: Set<String>, in header: JSONObject, what: String) throws(JOSEError) {
        for (key, _) in header where !allowed.contains(key.string) {
            let list = allowed.sorted().joined(separator: ", ")
            throw JOSEError.malformed("\(what) has an unexpected member \(quote(key.string)); expected only \(list)")
        }
    }

    /// The event must be the JSON object of SPEC §7.3: `t` "v" or "r", `a` and `p` strings.
    static func checkEvent(_ bytes: [UInt8]) throws(JOSEError) {
        let event: JSON
        do {
            event = try JSONParser.parseRejectingDuplicateKeys(bytes)
        } catch {
            throw JOSEError.malformed("the event is not JSON: \(error)")
        }
        guard case .object(let object) = event else {
            throw JOSEError.malformed("the event is \(event.typeName), not an object")
        }
        guard let type = object[Key("t")]?.stringValue, type == "v" || type == "r",
            object[Key("a")]?.stringValue != nil, object[Key("p")]?.stringValue != nil
        else {
            throw JOSEError.malformed("the event lacks t (\"v\" or \"r\"), a or p")
        }
    }
}

/// Reads a v1 data payload (SPEC §7.2) as an event.
enum V1Reader {
    static func event(_ payload: JSONObject) throws -> (Event, PayloadStatus) {
        func field(_ name: String) throws -> String {
            guard case .string(let value)? = payload[Key(name)] else {
                throw RequestError(.undecodable, "v1 payload: missing \(quote(name))")
            }
            return value
        }
        func json(_ name: String) throws -> JSON {
            do {
                return try JSONParser.parse(try field(name))
            } catch let error as JSONParseError {
                throw RequestError(.undecodable, "v1 payload: \(name) is not JSON: \(error)")
            }
        }
        let app = try field("app")
        let path = try field("sp")
        let type = try field("t")
        let status: PayloadStatus
        if type == "revoke" || type == "noData" {
            status = .ok
        } else {
            guard let parsed = PayloadStatus(rawValue: try field("s")) else {
                throw RequestError(.undecodable, "v1 payload: s must be \"OK\", \"OnlyKeys\" or \"TooBig\"")
            }
            status = parsed
        }
        switch type {
        case "noData":
            return (Event(app: app, path: path, body: .noData), status)
        case "revoke":
            guard let reason = RevokeReason(rawValue: try field("r")) else {
                throw RequestError(.undecodable, "v1 payload: unknown revoke reason \(quote(try field("r")))")
            }
            return (Event(app: app, path: path, body: .revoke(reason)), status)
        case "value":
            let value: JSON? = status == .ok ? try json("d") : nil
            return (Event(app: app, path: path, body: .value(value.flatMap { $0.isNull ? nil : $0 })), status)
        case "childEvent":
            guard case .object(let added) = try json("added"), case .array(let removed) = try json("removed"),
                case .object(let changed) = try json("changed")
            else {
                throw RequestError(.undecodable, "v1 payload: added and changed must be objects, removed an array")
            }
            let removedKeys = try removed.map { element -> Key in
                guard case .string(let key) = element else { throw RequestError(.undecodable, "v1 payload: removed holds a non-string") }
                return Key(key)
            }
            let diff = ChildDiff(
                added: ContiguousArray(added.map { JSONObject.Member($0.key, $0.value) }), removed: removedKeys,
                changed: ContiguousArray(changed.map { JSONObject.Member($0.key, $0.value) }))
            return (Event(app: app, path: path, body: .childEvent(diff)), status)
        default:
            throw RequestError(.undecodable, "v1 payload: t must be \"noData\", \"value\", \"childEvent\" or \"revoke\"")
        }
    }
}
