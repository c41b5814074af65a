import PushCore
import PushJSON
import PushJOSE

/// Reads the data payload of a push (SPEC §7.2 v1, §7.3 v2) into a ``PushNotification``, with
/// no I/O: v2 events verified and decrypted by PushJOSE's `PayloadDecoder`, exactly as
/// `pushdispatch decode` does, so what `decode` refuses is refused here too.
///
/// ``PushDispatch/notification(from:)`` builds one with the right keys (fetching the
/// service's public keys as needed); use this type directly when the keys are at hand.
public struct NotificationReader: Sendable {
    /// The application the notifications must be for.
    public let app: String
    let keys: KeyRing

    /// The largest data payload read, in bytes (providers allow 4 KiB).
    public static let maxPayloadBytes = 16 * 1024

    /// A reader for `app`'s notifications.
    ///
    /// - Parameter keys: the service's public signing keys (by `kid`), the keys the
    ///   application shares with its devices (HS256 secret, symmetric encryption keys) and the
    ///   device's private key.
    public init(app: String, keys: [JWK]) throws(NotificationError) {
        self.app = app
        do {
            self.keys = try KeyRing(keys)
        } catch {
            throw NotificationError(.keysUnavailable, "the keys do not form a key set: \(error)")
        }
    }

    /// Reads a data map as the app received it (FCM's `RemoteMessage.data`, the string fields
    /// of an APNs `userInfo`; see ``DataMap``).
    public func read(_ data: [String: String]) throws(NotificationError) -> PushNotification {
        var size = 0
        for (key, value) in data {
            size += key.utf8.count + value.utf8.count + 6
            if size > Self.maxPayloadBytes {
                throw NotificationError(.tooLarge, "the data map is over \(Self.maxPayloadBytes) bytes; a notification is at most 4 KiB")
            }
        }
        let object = JSONObject(data.map { (Key($0.key), JSON.string($0.value)) })
        var writer = JSONWriter(capacity: size + 2)
        writer.write(object)
        return try read(object: object, bytes: writer.bytes)
    }

    /// Reads a data map given as its JSON text: an object of strings (HMS's `data` string, a
    /// Web Push message's body).
    public func read(json bytes: [UInt8]) throws(NotificationError) -> PushNotification {
        guard bytes.count <= Self.maxPayloadBytes else {
            throw NotificationError(.tooLarge, "the data payload is \(bytes.count) bytes; a notification is at most 4 KiB")
        }
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(bytes)
        } catch {
            throw .malformed("the data payload is not JSON: \(error)")
        }
        guard case .object(let object) = json else {
            throw .malformed("a data payload is a JSON object, got \(json.typeName)")
        }
        return try read(object: object, bytes: bytes)
    }

    func read(object: JSONObject, bytes: [UInt8]) throws(NotificationError) -> PushNotification {
        let format: PayloadFormat
        switch object[Key("ver")] {
        case nil: format = .v1
        case .string("v2")?: format = .v2
        case let other?: throw .malformed("the payload's ver is \(other.excerpt); this library reads v1 (no ver) and \"v2\"")
        }
        let eventBytes: [UInt8]
        do {
            eventBytes = try PayloadDecoder(keys: keys).decode(bytes)
        } catch let error as JOSEError {
            throw Self.error(error)
        } catch {
            throw .malformed("\(error)")
        }
        let event: JSON
        do {
            event = try JSONParser.parse(eventBytes)
        } catch {
            throw .malformed("the event is not JSON: \(error)")
        }
        let read = try EventReader.read(event)
        guard utf8Equal(read.app, app) else {
            throw NotificationError(.otherApplication, "the event is for application \(Bounded.quoted(read.app)), not \(Bounded.quoted(app))")
        }
        return PushNotification(
            app: read.app, path: read.path, event: read.event, status: read.status, format: format, protection: protection(object, format))
    }

    /// How a payload that decoded was protected: by its format and the key its `kid` names.
    func protection(_ payload: JSONObject, _ format: PayloadFormat) -> PushNotification.Protection {
        guard format == .v2 else { return .none }
        guard case .string(let kid)? = payload[Key("kid")], let key = keys.key(kid: kid, use: .encryption) else { return .signed }
        if case .octet = key.material { return .sharedKey }
        return .endToEnd
    }

    /// The notification error of a JOSE failure, with `decode`'s message.
    static func error(_ error: JOSEError) -> NotificationError {
        switch error.code {
        case .malformedToken, .invalidKey: return NotificationError(.malformed, error.description)
        case .unsupportedAlgorithm: return NotificationError(.unsupportedAlgorithm, error.description)
        case .unknownKeyID: return NotificationError(.unknownKey, error.description)
        case .badSignature: return NotificationError(.badSignature, error.description)
        case .wrongKey: return NotificationError(.wrongKey, error.description)
        case .keyMismatch: return NotificationError(.keyMismatch, error.description)
        }
    }
}
