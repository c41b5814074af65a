import Foundation
import PushCore
import PushContracts
import PushJSON
import PushEngine
import PushJOSE
import PushStore

/// `pushdispatch export` / `import`: a store's durable state as NDJSON, to move from SQLite to
/// PostgreSQL without loss (docs/scaling-out.md). One JSON object per line:
///
/// - `{"pushdispatchExport":1,"from":…}` first;
/// - `{"type":"serviceKey","jwk":{…}}`, oldest first (private keys: keep the file private);
/// - `{"type":"handles","highWater":N}`: no handle up to N is handed out again;
/// - `{"type":"subscription","handle":N,"document":{…},"auth":{…}}` (`auth`: the claims it
///   was allowed with, when it has them);
/// - `{"type":"tree","app":…,"tree":…}`: each application's tree (snapshot and journal applied);
/// - `{"type":"checkpoint","source":…,"lastSeq":…,"position":…,"fileIdentity":…}`;
/// - `{"type":"notification",…}`: waiting notifications in order, payloads in base64url;
/// - `{"type":"end","counts":{…}}` last: an import refuses a file without it (cut short).
public enum StoreTransfer {
    public struct Counts: Sendable, Equatable {
        public var serviceKeys = 0
        public var subscriptions = 0
        public var trees = 0
        public var checkpoints = 0
        public var notifications = 0

        public init() {}

        var json: JSON {
            JSON.members([
                ("serviceKeys", .int(Int64(serviceKeys))), ("subscriptions", .int(Int64(subscriptions))), ("trees", .int(Int64(trees))),
                ("checkpoints", .int(Int64(checkpoints))), ("notifications", .int(Int64(notifications))),
            ])
        }

        public var summary: String {
            "\(subscriptions) subscriptions, \(serviceKeys) service keys, \(trees) trees, \(checkpoints) checkpoints, \(notifications) waiting notifications"
        }
    }

    /// Writes every line of `store`'s state through `emit` (a line without its newline).
    public static func export(_ store: any RuntimeStore, emit: ([UInt8]) throws -> Void) async throws -> Counts {
        if !(try await store.legacyRevocations(limit: 1)).isEmpty {
            throw TransferError(.legacyOutbox, "the store holds revocations in its version-1 outbox; start the service on it once (it converts them), then export")
        }
        func line(_ json: JSON) throws {
            var writer = JSONWriter(capacity: 256)
            writer.write(json)
            try emit(writer.bytes)
        }
        var counts = Counts()
        try line(JSON.members([("pushdispatchExport", .int(1)), ("from", .string(store.location))]))
        for key in try await store.loadServiceKeys() {
            try line(JSON.members([("type", "serviceKey"), ("jwk", key)]))
            counts.serviceKeys += 1
        }
        let highWater = try await store.handleHighWater()
        var after: Int64 = 0
        while true {
            let page = try await store.subscriptions(app: nil, after: after, limit: 1_000)
            guard let last = page.last else { break }
            for subscription in page {
                var members: [(String, JSON)] = [("type", "subscription"), ("handle", .int(subscription.handle ?? 0)), ("document", subscription.document)]
                if let auth = subscription.auth { members.append(("auth", auth)) }
                try line(JSON.members(members))
            }
            counts.subscriptions += page.count
            after = last.handle ?? after
        }
        try line(JSON.members([("type", "handles"), ("highWater", .int(max(highWater, after)))]))
        for app in try await store.treeApplications() {
            let tree = try await TreeLoader.tree(app: app, from: store).tree
            try line(JSON.members([("type", "tree"), ("app", .string(app)), ("tree", tree.root ?? .null)]))
            counts.trees += 1
        }
        for checkpoint in try await store.checkpoints() {
            try line(
                JSON.members([
                    ("type", "checkpoint"), ("source", .string(checkpoint.source)), ("lastSeq", checkpoint.lastSeq.map { .int($0) } ?? .null),
                    ("position", .int(checkpoint.position)), ("fileIdentity", checkpoint.fileIdentity.map { .string($0) } ?? .null),
                ]))
            counts.checkpoints += 1
        }
        for notification in try await store.notifications(limit: Int.max) {
            let entry = notification.entry
            try line(
                JSON.members([
                    ("type", "notification"), ("app", .string(entry.app)), ("subscriptionHandle", .int(entry.subscriptionHandle)),
                    ("subscriptionID", .string(entry.subscriptionID)), ("kind", .string(entry.kind.rawValue)),
                    ("target", entry.target.map { .string($0) } ?? .null), ("destination", entry.destination.map { .string($0) } ?? .null),
                    ("event", .string(entry.notification.rawValue)), ("payload", .string(Base64URL.encodeToString(entry.payload))),
                    ("recordSeq", entry.recordSeq.map { .int($0) } ?? .null), ("createdAt", .int(notification.createdAt)),
                    ("nextAttemptAt", .int(notification.nextAttemptAt)), ("attempts", .int(Int64(notification.attempts))),
                    ("firstAttemptAt", notification.firstAttemptAt.map { .int($0) } ?? .null),
                ]))
            counts.notifications += 1
        }
        try line(JSON.members([("type", "end"), ("counts", counts.json)]))
        return counts
    }

    /// Reads an export. Sources' checkpoints are filed as PostgreSQL files them
    /// (``SharedInstances/sourceKey(source:machine:)``: the socket's shared, a queue file's
    /// under `machine`) unless they name a machine already.
    public static func parse(_ bytes: [UInt8], machine: String) throws -> (StoreContents, Counts) {
        var contents = StoreContents()
        var counts = Counts()
        var ended = false
        var number = 0
        var treeApps: Set<String> = []
        var checkpointSources: Set<String> = []
        for raw in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            if raw.isEmpty { continue }
            func fail(_ message: String) -> TransferError { TransferError(.invalidLine, message, line: number) }
            guard !ended else { throw fail("nothing may follow the end line") }
            let json: JSON
            do { json = try JSONParser.parse(Array(raw)) } catch { throw fail("not JSON: \(error)") }
            if number == 1 {
                guard json["pushdispatchExport"] == .int(1) else { throw fail("not a pushdispatch export (version 1): expected {\"pushdispatchExport\":1,…} first") }
                continue
            }
            func string(_ key: String) throws -> String {
                guard let value = json[key]?.stringValue else { throw fail("\(key): expected a string") }
                return value
            }
            func optionalString(_ key: String) throws -> String? {
                guard let value = json[key], !value.isNull else { return nil }
                guard let text = value.stringValue else { throw fail("\(key): expected a string or null") }
                return text
            }
            func integer(_ key: String) throws -> Int64 {
                guard case .int(let value)? = json[key] else { throw fail("\(key): expected an integer") }
                return value
            }
            func optionalInteger(_ key: String) throws -> Int64? {
                guard let value = json[key], !value.isNull else { return nil }
                guard case .int(let number) = value else { throw fail("\(key): expected an integer or null") }
                return number
            }
            switch json["type"]?.stringValue {
            case "serviceKey":
                guard let jwk = json["jwk"], case .object = jwk else { throw fail("jwk: expected an object") }
                contents.serviceKeys.append(jwk.description)
                counts.serviceKeys += 1
            case "handles":
                contents.handleHighWater = max(0, try integer("highWater"))
            case "subscription":
                let handle = try integer("handle")
                guard handle > 0, let document = json["document"] else { throw fail("expected a positive handle and a document") }
                var subscription: Subscription
                do {
                    subscription = try Subscription(document: document, handle: handle)
                } catch {
                    throw fail("document: \(error.message)")
                }
                if let auth = json["auth"], !auth.isNull {
                    guard Subscription.claimsFit(auth) else {
                        throw fail("auth: expected the claims object, at most \(Subscription.maxAuthBytes) bytes")
                    }
                    subscription.auth = auth
                }
                contents.subscriptions.append(subscription)
                counts.subscriptions += 1
            case "tree":
                let app = try string("app")
                do { try AppID.validate(app, field: "app") } catch { throw fail(error.message) }
                guard treeApps.insert(app).inserted else { throw fail("a second tree for \(JSONWriter.quoted(app))") }
                var writer = JSONWriter(capacity: 1024)
                writer.write(json["tree"] ?? .null)
                contents.trees.append((app, writer.bytes))
                counts.trees += 1
            case "checkpoint":
                var source = try string("source")
                if !source.contains("/") { source = SharedInstances.sourceKey(source: source, machine: machine) }
                let position = try integer("position")
                guard position >= 0 else { throw fail("position: expected 0 or more") }
                guard checkpointSources.insert(source).inserted else { throw fail("a second checkpoint for source \(JSONWriter.quoted(source))") }
                contents.checkpoints.append(
                    SourceCheckpoint(source: source, lastSeq: try optionalInteger("lastSeq"), position: position, fileIdentity: try optionalString("fileIdentity")))
                counts.checkpoints += 1
            case "notification":
                guard let kind = SubscriptionKind(rawValue: try string("kind")) else { throw fail("kind: expected one of \(SubscriptionKind.allCases.map(\.rawValue).joined(separator: ", "))") }
                guard let event = NotificationKind(rawValue: try string("event")) else { throw fail("event: expected value, noData, childEvent or revoke") }
                let payload: [UInt8]
                guard let decoded = Base64URL.decode(try string("payload")) else { throw fail("payload: expected base64url") }
                payload = decoded
                let attempts = try integer("attempts")
                guard (0...Int64(Int32.max)).contains(attempts) else { throw fail("attempts: expected 0 or more") }
                let entry = OutboxEntry(
                    app: try string("app"), subscriptionHandle: try integer("subscriptionHandle"), subscriptionID: try string("subscriptionID"),
                    kind: kind, target: try optionalString("target"), destination: try optionalString("destination"), notification: event,
                    payload: payload, recordSeq: try optionalInteger("recordSeq"))
                contents.notifications.append(
                    StoredNotification(
                        id: 0, entry: entry, createdAt: try integer("createdAt"), nextAttemptAt: try integer("nextAttemptAt"), attempts: Int(attempts),
                        firstAttemptAt: try optionalInteger("firstAttemptAt")))
                counts.notifications += 1
            case "end":
                guard let expected = json["counts"], expected == counts.json else {
                    throw fail("the end line counts \(json["counts"]?.description ?? "nothing"), the file holds \(counts.json): it is incomplete or was edited")
                }
                ended = true
            default:
                throw fail("type: expected serviceKey, handles, subscription, tree, checkpoint, notification or end")
            }
        }
        guard number > 0, !bytes.isEmpty else { throw TransferError(.empty, "the file is empty") }
        guard ended else { throw TransferError(.cutShort, "the file ends without its end line: it was cut short; export again") }
        return (contents, counts)
    }
}

/// An export or import cannot go on: what kind of fault, where, and why.
public struct TransferError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of fault: compare with the static members.
    public struct Kind: Sendable, Hashable {
        private enum Code: Sendable, Hashable { case legacyOutbox, invalidLine, empty, cutShort, file, notPostgreSQL }
        private let code: Code

        /// The store still holds a version-1 outbox: it must be converted first.
        public static let legacyOutbox = Kind(code: .legacyOutbox)
        /// A line of the export is not what the format allows (``TransferError/line``).
        public static let invalidLine = Kind(code: .invalidLine)
        /// The export file is empty.
        public static let empty = Kind(code: .empty)
        /// The export file ends without its end line.
        public static let cutShort = Kind(code: .cutShort)
        /// The export file cannot be created, written or read.
        public static let file = Kind(code: .file)
        /// An import was asked of a store that is not PostgreSQL.
        public static let notPostgreSQL = Kind(code: .notPostgreSQL)
    }

    public let kind: Kind
    /// What is wrong.
    public let detail: String
    /// The line of the export file at fault (1-based), when there is one.
    public let line: Int?

    init(_ kind: Kind, _ detail: String, line: Int? = nil) {
        self.kind = kind
        self.detail = detail
        self.line = line
    }

    public var description: String { line.map { "line \($0): \(detail)" } ?? detail }

    /// Equal when of the same kind (the context is for people).
    public static func == (lhs: TransferError, rhs: TransferError) -> Bool { lhs.kind == rhs.kind }
}
