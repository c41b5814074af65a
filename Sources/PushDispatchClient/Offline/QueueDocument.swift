import PushCore
import PushJSON

/// The offline queue as a file: one JSON document, written whole each time the queue changes.
///
/// ```json
/// {"pushdispatchQueue":1,"app":"toto","operations":[
///   {"id":"5f0c…","uid":"alice","attempts":0,"op":"subscribe",
///    "target":{"kind":"mobile","context":"<token>"},"path":"/rooms/lobby",
///    "options":{"mode":"value","format":"v2"},"allowsUpdate":true}]}
/// ```
///
/// Read back with every field checked (the file is outside input like any other): a document
/// this version cannot read whole is refused with what is wrong and where, never half-read.
/// No bearer token is ever written; the device tokens are, as in the service's own documents.
enum QueueDocument {
    /// The version written, and the only one read.
    static let version: Int64 = 1
    /// Largest file read, in bytes.
    static let maxBytes = 32 << 20
    /// Most operations a file may hold (the queue's limit is far lower; a file written by a
    /// build with a higher limit is still read).
    static let maxOperations = 100_000

    static func encode(app: String, operations: [PendingOperation]) -> [UInt8] {
        let document: JSON = .object(
            JSONObject([
                (Key("pushdispatchQueue"), .int(version)), (Key("app"), .string(app)),
                (Key("operations"), .array(operations.map(encode))),
            ]))
        var writer = JSONWriter(capacity: 256 + operations.count * 256)
        writer.write(document)
        return writer.bytes
    }

    static func encode(_ operation: PendingOperation) -> JSON {
        var members: [(Key, JSON)] = [(Key("id"), .string(operation.id))]
        if let uid = operation.uid { members.append((Key("uid"), .string(uid))) }
        members.append((Key("attempts"), .int(Int64(operation.attempts))))
        if operation.absorbed { members.append((Key("absorbed"), .bool(true))) }
        switch operation.action {
        case .subscribe(let target, let path, let options, let allowsUpdate):
            members += [
                (Key("op"), "subscribe"), (Key("target"), encode(target)), (Key("path"), .string(path)), (Key("options"), .object(options)),
                (Key("allowsUpdate"), .bool(allowsUpdate)),
            ]
        case .unsubscribe(let target, let path):
            members += [(Key("op"), "unsubscribe"), (Key("target"), encode(target)), (Key("path"), .string(path))]
        case .refresh(let id, let path, let until):
            members += [(Key("op"), "refresh"), (Key("subscription"), .string(id)), (Key("path"), .string(path))]
            if let until { members.append((Key("until"), .int(until))) }
        case .cancel(let id, let path):
            members += [(Key("op"), "cancel"), (Key("subscription"), .string(id)), (Key("path"), .string(path))]
        case .unsubscribeAll(let device):
            members += [(Key("op"), "unsubscribeAll"), (Key("device"), encode(.device(device)))]
        case .updateDeviceToken(let from, let to):
            members += [
                (Key("op"), "updateDeviceToken"), (Key("from"), .array(from.map { encode(.device($0)) })), (Key("to"), encode(.device(to))),
            ]
        }
        return .object(JSONObject(members))
    }

    static func encode(_ target: PendingOperation.Target) -> JSON {
        switch target {
        case .device(let token):
            return .object(JSONObject([(Key("kind"), .string(token.kind.subscriptionKind)), (Key("context"), .string(token.value))]))
        case .webhook(let name, let context):
            return .object(JSONObject([(Key("kind"), .string("webhook")), (Key("destination"), .string(name)), (Key("context"), .string(context))]))
        }
    }

    /// The operations of a queue file of `app`; ``PushClientError/Code/queueStore`` naming the
    /// first problem found, and where.
    static func decode(_ bytes: [UInt8], app: String) throws(PushClientError) -> [PendingOperation] {
        guard bytes.count <= maxBytes else {
            throw failure("the file has \(bytes.count) bytes, more than \(maxBytes)")
        }
        let json: JSON
        do {
            json = try JSONParser.parseRejectingDuplicateKeys(bytes)
        } catch {
            throw failure("the file is not JSON: \(error)")
        }
        let reader = Reader(location: "the file")
        let document = try reader.object(json)
        try reader.only(["pushdispatchQueue", "app", "operations"], in: document)
        guard case .int(let version)? = document[Key("pushdispatchQueue")], version == Self.version else {
            throw failure("\"pushdispatchQueue\" is not \(Self.version): not a queue file, or one of another version of the library")
        }
        let owner = try reader.string(document, "app")
        guard owner == app else {
            throw failure("the file is the queue of the application \(Bounded.quoted(owner)), not of \(Bounded.quoted(app))")
        }
        guard case .array(let entries)? = document[Key("operations")] else {
            throw failure("\"operations\" is not an array")
        }
        guard entries.count <= maxOperations else {
            throw failure("\"operations\" has \(entries.count) entries, more than \(maxOperations)")
        }
        var operations: [PendingOperation] = []
        var ids = Set<String>()
        for (index, entry) in entries.enumerated() {
            var entryReader = Reader(location: "operations[\(index)]")
            let operation = try entryReader.operation(entry)
            guard ids.insert(operation.id).inserted else {
                throw failure("operations[\(index)]: the id \(operation.id) appears twice")
            }
            operations.append(operation)
        }
        return operations
    }

    static func failure(_ message: String) -> PushClientError {
        PushClientError(.queueStore, "the offline queue's file cannot be read: \(message)")
    }

    /// Reads checked fields, naming where a problem is.
    struct Reader {
        var location: String

        func fail(_ message: String) -> PushClientError {
            QueueDocument.failure("\(location): \(message)")
        }

        func object(_ json: JSON) throws(PushClientError) -> JSONObject {
            guard case .object(let object) = json else { throw fail("expected an object, got \(json.typeName)") }
            return object
        }

        func only(_ names: Set<String>, in object: JSONObject) throws(PushClientError) {
            for key in object.keys where !names.contains(key.string) {
                throw fail("unexpected member \(Bounded.quoted(key.string))")
            }
        }

        func string(_ object: JSONObject, _ name: String, limit: Int = 4096) throws(PushClientError) -> String {
            guard case .string(let text)? = object[Key(name)] else { throw fail("\"\(name)\" is not a string") }
            guard text.utf8.count <= limit, !text.utf8.contains(0) else {
                throw fail("\"\(name)\" is longer than \(limit) bytes or holds U+0000")
            }
            return text
        }

        func path(_ object: JSONObject) throws(PushClientError) -> String {
            let text = try string(object, "path")
            guard let parsed = try? Path(text), parsed.string == text else {
                throw fail("\"path\" \(Bounded.quoted(text)) is not a canonical path")
            }
            return text
        }

        func subscriptionID(_ object: JSONObject) throws(PushClientError) -> String {
            let id = try string(object, "subscription", limit: 128)
            guard !id.isEmpty, id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }) else {
                throw fail("\"subscription\" is not a subscription id")
            }
            return id
        }

        func device(_ json: JSON?, _ name: String) throws(PushClientError) -> DeviceToken {
            guard let json, case .device(let token) = try target(json, name, webhooks: false) else {
                throw fail("\"\(name)\" is not a device")
            }
            return token
        }

        func target(_ json: JSON?, _ name: String, webhooks: Bool = true) throws(PushClientError) -> PendingOperation.Target {
            guard let json, case .object(let object) = json else { throw fail("\"\(name)\" is not an object") }
            let inner = Reader(location: "\(location).\(name)")
            let kind = try inner.string(object, "kind", limit: 32)
            if kind == "webhook" && webhooks {
                try inner.only(["kind", "destination", "context"], in: object)
                let name = try inner.string(object, "destination", limit: 128)
                let context = try inner.string(object, "context")
                do {
                    _ = try SubscriptionDocument.webhook(name, context: context, path: "/")
                } catch {
                    throw inner.fail(error.message)
                }
                return .webhook(name: name, context: context)
            }
            try inner.only(["kind", "context"], in: object)
            let value = try inner.string(object, "context")
            guard let deviceKind = DeviceToken.Kind(rawValue: kind) else {
                throw inner.fail("\"kind\" \(Bounded.quoted(kind)) is not a kind of device this version knows")
            }
            do throws(PushClientError) {
                switch deviceKind {
                case .fcm: return .device(try .fcm(value))
                case .hms: return .device(try .hms(value))
                case .harmonyOS: return .device(try .harmonyOS(value))
                case .apns: return .device(try .apns(hex: value))
                case .webPush: return .device(try .webPush(subscriptionJSON: value))
                }
            } catch {
                throw inner.fail(error.message)
            }
        }

        /// The subscription options kept as they will be sent: mode, format, encryption and
        /// expiration, each of the type the service reads.
        func options(_ json: JSON?) throws(PushClientError) -> JSONObject {
            guard let json, case .object(let object) = json else { throw fail("\"options\" is not an object") }
            let inner = Reader(location: "\(location).options")
            try inner.only(["mode", "format", "encryption", "expirationTimestampSeconds"], in: object)
            if object[Key("mode")] != nil, Mode(rawValue: try inner.string(object, "mode", limit: 16)) == nil {
                throw inner.fail("\"mode\" is not noData, value or childEvent")
            }
            if object[Key("format")] != nil, PayloadFormat(rawValue: try inner.string(object, "format", limit: 16)) == nil {
                throw inner.fail("\"format\" is not v1 or v2")
            }
            if let encryption = object[Key("encryption")], encryption.objectValue == nil {
                throw inner.fail("\"encryption\" is not an object")
            }
            if let expiration = object[Key("expirationTimestampSeconds")] {
                guard case .int(let seconds) = expiration, seconds >= 1 else {
                    throw inner.fail("\"expirationTimestampSeconds\" is not a positive integer")
                }
            }
            return object
        }

        mutating func operation(_ json: JSON) throws(PushClientError) -> PendingOperation {
            let object = try object(json)
            let id = try string(object, "id", limit: 16)
            guard id.utf8.count == 16, id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                throw fail("\"id\" is not 16 lowercase hexadecimal digits")
            }
            location += " (\(id))"
            var uid: String?
            if object[Key("uid")] != nil {
                let text = try string(object, "uid", limit: 256)
                guard !text.isEmpty, !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
                    throw fail("\"uid\" is empty or holds a control character")
                }
                uid = text
            }
            guard case .int(let attempts)? = object[Key("attempts")], attempts >= 0, attempts <= Int64(Int32.max) else {
                throw fail("\"attempts\" is not an integer from 0 to \(Int32.max)")
            }
            var absorbed = false
            if let value = object[Key("absorbed")] {
                guard case .bool(let flag) = value else { throw fail("\"absorbed\" is not a boolean") }
                absorbed = flag
            }
            let common: Set<String> = ["id", "uid", "attempts", "absorbed", "op"]
            let action: PendingOperation.Action
            switch try string(object, "op", limit: 32) {
            case "subscribe":
                try only(common.union(["target", "path", "options", "allowsUpdate"]), in: object)
                guard case .bool(let allowsUpdate)? = object[Key("allowsUpdate")] else { throw fail("\"allowsUpdate\" is not a boolean") }
                action = .subscribe(
                    target: try target(object[Key("target")], "target"), path: try path(object), options: try options(object[Key("options")]),
                    allowsUpdate: allowsUpdate)
            case "unsubscribe":
                try only(common.union(["target", "path"]), in: object)
                action = .unsubscribe(target: try target(object[Key("target")], "target"), path: try path(object))
            case "refresh":
                try only(common.union(["subscription", "path", "until"]), in: object)
                var until: Int64?
                if let value = object[Key("until")] {
                    guard case .int(let seconds) = value, seconds >= 1 else { throw fail("\"until\" is not a positive integer") }
                    until = seconds
                }
                action = .refresh(id: try subscriptionID(object), path: try path(object), until: until)
            case "cancel":
                try only(common.union(["subscription", "path"]), in: object)
                action = .cancel(id: try subscriptionID(object), path: try path(object))
            case "unsubscribeAll":
                try only(common.union(["device"]), in: object)
                action = .unsubscribeAll(device: try device(object[Key("device")], "device"))
            case "updateDeviceToken":
                try only(common.union(["from", "to"]), in: object)
                guard case .array(let entries)? = object[Key("from")], (1...OperationMerging.maxTokensPerUpdate).contains(entries.count) else {
                    throw fail("\"from\" is not an array of 1 to \(OperationMerging.maxTokensPerUpdate) devices")
                }
                var from: [DeviceToken] = []
                for (index, entry) in entries.enumerated() { from.append(try device(entry, "from[\(index)]")) }
                action = .updateDeviceToken(from: from, to: try device(object[Key("to")], "to"))
            case let other:
                throw fail("\"op\" \(Bounded.quoted(other)) is not an operation this version knows")
            }
            return PendingOperation(id: id, uid: uid, action: action, attempts: Int(attempts), absorbed: absorbed)
        }
    }
}
