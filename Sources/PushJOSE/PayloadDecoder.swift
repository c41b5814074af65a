import PushCore

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
            json = try JSONParser.parse(line)
        } catch {
            throw RequestError("the payload is not JSON: \(error)")
        }
        guard case .object(let payload) = json else {
            throw RequestError("a data payload is a JSON object, got \(json.typeName)")
        }
        for (key, value) in payload {
            guard case .string = value else {
                throw RequestError("data payload field \(quote(key.string)) is \(value.typeName); every value is a string")
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

    private func decodeV2(_ payload: JSONObject) throws -> [UInt8] {
        guard payload[Key("srv")] == .string("webcom") else {
            throw RequestError("v2 payload: srv must be \"webcom\"")
        }
        guard case .string(let evt)? = payload[Key("evt")] else {
            throw RequestError("v2 payload: missing evt")
        }
        guard let keys else {
            throw RequestError("v2 payloads are signed or encrypted: pass --keys with the JWK Set")
        }
        let token = Array(evt.utf8)
        let dots = token.lazy.filter { $0 == UInt8(ascii: ".") }.count
        let eventBytes: [UInt8]
        switch dots {
        case 2:
            if payload[Key("kid")] != nil {
                throw JOSEError.malformed("the payload has a kid field but evt is a JWS, not a JWE")
            }
            eventBytes = try JWS.verify(token, keys: keys).payload
        case 4:
            let decrypted = try JWE.decrypt(token, keys: keys)
            if case .string(let kid)? = payload[Key("kid")], kid != decrypted.kid {
                throw JOSEError.malformed("the payload's kid \(quote(kid)) differs from the JWE header's")
            }
            if decrypted.contentType == "JWT" {
                eventBytes = try JWS.verify(decrypted.plaintext, keys: keys).payload
            } else {
                eventBytes = decrypted.plaintext
            }
        default:
            throw JOSEError.malformed("evt is neither a compact JWS (3 parts) nor a compact JWE (5 parts)")
        }
        do {
            _ = try JSONParser.parse(eventBytes)
        } catch {
            throw JOSEError.malformed("the event is not JSON: \(error)")
        }
        return eventBytes
    }
}

/// Reads a v1 data payload (SPEC §7.2) as an event.
enum V1Reader {
    static func event(_ payload: JSONObject) throws -> (Event, PayloadStatus) {
        func field(_ name: String) throws -> String {
            guard case .string(let value)? = payload[Key(name)] else {
                throw RequestError("v1 payload: missing \(quote(name))")
            }
            return value
        }
        func json(_ name: String) throws -> JSON {
            do {
                return try JSONParser.parse(try field(name))
            } catch let error as JSONParseError {
                throw RequestError("v1 payload: \(name) is not JSON: \(error)")
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
                throw RequestError("v1 payload: s must be \"OK\", \"OnlyKeys\" or \"TooBig\"")
            }
            status = parsed
        }
        switch type {
        case "noData":
            return (Event(app: app, path: path, body: .noData), status)
        case "revoke":
            guard let reason = RevokeReason(rawValue: try field("r")) else {
                throw RequestError("v1 payload: unknown revoke reason \(quote(try field("r")))")
            }
            return (Event(app: app, path: path, body: .revoke(reason)), status)
        case "value":
            let value: JSON? = status == .ok ? try json("d") : nil
            return (Event(app: app, path: path, body: .value(value.flatMap { $0.isNull ? nil : $0 })), status)
        case "childEvent":
            guard case .object(let added) = try json("added"), case .array(let removed) = try json("removed"),
                case .object(let changed) = try json("changed")
            else {
                throw RequestError("v1 payload: added and changed must be objects, removed an array")
            }
            let removedKeys = try removed.map { element -> Key in
                guard case .string(let key) = element else { throw RequestError("v1 payload: removed holds a non-string") }
                return Key(key)
            }
            let diff = ChildDiff(
                added: ContiguousArray(added.map { JSONObject.Member($0.key, $0.value) }), removed: removedKeys,
                changed: ContiguousArray(changed.map { JSONObject.Member($0.key, $0.value) }))
            return (Event(app: app, path: path, body: .childEvent(diff)), status)
        default:
            throw RequestError("v1 payload: t must be \"noData\", \"value\", \"childEvent\" or \"revoke\"")
        }
    }
}
