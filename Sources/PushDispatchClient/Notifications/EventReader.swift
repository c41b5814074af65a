import PushCore
import PushJSON

/// Reads the event object of SPEC §7.3 (what a v2 `evt` carries, what `decode` prints for a
/// v1 payload, and the `event` of a webhook body) into a typed event, strictly: every field of
/// the right type, nothing the service does not write.
///
/// `{"t":"v","m":"value","a":…,"p":…,"s":"OK","v":…}`,
/// `{"t":"v","m":"childEvent","a":…,"p":…,"s":…,"c":{"a":{…},"r":[…],"c":{…}}}`,
/// `{"t":"v","m":"noData","a":…,"p":…}`, `{"t":"r","a":…,"p":…,"r":reason}`.
enum EventReader {
    struct Read: Equatable {
        var app: String
        var path: String
        var event: NotificationEvent
        var status: PayloadStatus
    }

    static func read(_ json: JSON) throws(NotificationError) -> Read {
        guard case .object(let object) = json else {
            throw .malformed("the event is \(json.typeName), not an object")
        }
        let type = try string(object, "t")
        let app = try string(object, "a")
        let path = try string(object, "p")
        let parsed: Path
        do {
            parsed = try Path(path)
        } catch {
            throw .malformed("the event's path is not valid: \(error)")
        }
        guard parsed.string == path else {
            throw .malformed("the event's path \(Bounded.quoted(path)) is not canonical (\(Bounded.quoted(parsed.string)))")
        }
        switch type {
        case "r":
            try only(["t", "a", "p", "r"], object)
            return Read(app: app, path: path, event: .revoked(RevocationReason(try string(object, "r"))), status: .ok)
        case "v":
            let mode = try string(object, "m")
            switch mode {
            case "noData":
                try only(["t", "m", "a", "p"], object)
                return Read(app: app, path: path, event: .noData, status: .ok)
            case "value":
                let status = try self.status(object)
                if status == .onlyKeys { throw .malformed("a value event is OK or TooBig, not OnlyKeys") }
                if status == .ok {
                    try only(["t", "m", "a", "p", "s", "v"], object)
                    guard let value = object[Key("v")] else { throw .malformed("a value event with status OK carries v") }
                    return Read(app: app, path: path, event: .value(value.isNull ? nil : value), status: status)
                }
                try only(["t", "m", "a", "p", "s"], object)
                return Read(app: app, path: path, event: .value(nil), status: status)
            case "childEvent":
                try only(["t", "m", "a", "p", "s", "c"], object)
                let status = try self.status(object)
                let changes = try childChanges(object[Key("c")], status: status)
                return Read(app: app, path: path, event: .childEvent(changes), status: status)
            default:
                throw .malformed("the event's mode m is \(Bounded.quoted(mode)); expected \"value\", \"noData\" or \"childEvent\"")
            }
        default:
            throw .malformed("the event's type t is \(Bounded.quoted(type)); expected \"v\" or \"r\"")
        }
    }

    static func childChanges(_ json: JSON?, status: PayloadStatus) throws(NotificationError) -> ChildChanges {
        guard case .object(let c)? = json else { throw .malformed("a childEvent carries c, an object") }
        try only(["a", "r", "c"], c, what: "c")
        guard case .object(let added)? = c[Key("a")], case .array(let removed)? = c[Key("r")], case .object(let changed)? = c[Key("c")]
        else {
            throw .malformed("c holds a (an object), r (an array of keys) and c (an object)")
        }
        var removedKeys: [String] = []
        for element in removed {
            guard case .string(let key) = element else { throw .malformed("c.r holds \(element.typeName), not a key") }
            removedKeys.append(key)
        }
        func map(_ object: JSONObject, _ name: String) throws(NotificationError) -> [String: JSON] {
            var result: [String: JSON] = [:]
            for (key, value) in object {
                if status == .onlyKeys && value != .bool(true) {
                    throw .malformed("an OnlyKeys childEvent has true for every value of \(name)")
                }
                result[key.string] = value
            }
            return result
        }
        let changes = ChildChanges(added: try map(added, "c.a"), changed: try map(changed, "c.c"), removed: removedKeys)
        if status == .tooBig && !(changes.added.isEmpty && changes.changed.isEmpty && changes.removed.isEmpty) {
            throw .malformed("a TooBig childEvent carries no children")
        }
        return changes
    }

    static func status(_ object: JSONObject) throws(NotificationError) -> PayloadStatus {
        let text = try string(object, "s")
        guard let status = PayloadStatus(rawValue: text) else {
            throw .malformed("the event's status s is \(Bounded.quoted(text)); expected \"OK\", \"OnlyKeys\" or \"TooBig\"")
        }
        return status
    }

    static func string(_ object: JSONObject, _ name: String) throws(NotificationError) -> String {
        guard let value = object[Key(name)] else { throw .malformed("the event has no \(name)") }
        guard case .string(let text) = value else { throw .malformed("the event's \(name) is \(value.typeName), not a string") }
        return text
    }

    static func only(_ allowed: Set<String>, _ object: JSONObject, what: String = "the event") throws(NotificationError) {
        for (key, _) in object where !allowed.contains(key.string) {
            throw .malformed("\(what) has an unexpected field \(Bounded.quoted(key.string))")
        }
    }
}
