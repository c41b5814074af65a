import Foundation
import PushCore
import PushJSON
import PushMatching

#if canImport(Glibc)
import Glibc
#endif
import PushEngine
import PushJOSE
import PushStore

/// `pushdispatch replay --dry-run` (SPEC §7.6, §11.12): a change stream through the service's
/// own checks and pipeline (the same ``LineChecker``, ``RecordPipeline`` and
/// ``NotificationBuilder``), starting from empty trees, printing each notification instead of
/// storing it.
public struct ReplaySession {
    /// What `replay` was given.
    public struct Inputs {
        /// The configuration (`--config`): applications, their keys and limits, and the store
        /// (read if it exists, never created or written).
        public var configuration: ServiceConfiguration?
        /// Subscription documents, one per line, each with its `app` and `uid` (`--subscriptions`).
        public var subscriptionLines: [[UInt8]]
        /// `--keys`: the keys of applications the configuration does not name (signing and
        /// symmetric encryption keys).
        public var keys: KeyRing?

        public init(configuration: ServiceConfiguration?, subscriptionLines: [[UInt8]], keys: KeyRing?) {
            self.configuration = configuration
            self.subscriptionLines = subscriptionLines
            self.keys = keys
        }
    }

    var checker = LineChecker()
    /// The rules' `now`.
    let clock: any ServiceClock = SystemClock()
    var pipeline: RecordPipeline
    let subscriptions: InMemorySubscriptions
    var builder: NotificationBuilder
    /// Notes for standard error (an ephemeral service key, …).
    public private(set) var notes: [String] = []

    /// Number of subscriptions replayed against.
    public var subscriptionCount: Int { subscriptions.count }

    public static func prepare(_ inputs: Inputs) async throws -> ReplaySession {
        var notes: [String] = []
        let applications = try inputs.configuration.map { try PreparedApplication.prepareAll($0, authentication: false) } ?? [:]
        // The configured store, read if it exists: subscriptions and the service's key.
        var stored: [Subscription] = []
        var serviceKeys: [JWK] = []
        if let configuration = inputs.configuration, case .sqlite(let path) = configuration.store, FileManager.default.fileExists(atPath: path) {
            let store = try SQLiteStore(readingOnly: path)
            var after: Int64 = 0
            while true {
                let page = try await store.subscriptions(app: nil, after: after, limit: 1_000)
                guard let last = page.last?.handle else { break }
                stored += page
                after = last
            }
            serviceKeys = try await store.loadServiceKeys().enumerated().map { try JWK(json: $1, where: "service key \($0)") }
        }
        let serviceKey: JWK
        if let last = serviceKeys.last {
            serviceKey = last
        } else {
            serviceKey = ServiceKey.generate()
            notes.append("no stored service key: v2 payloads of applications without signingKey are signed with a new key, kid \(serviceKey.kid!)")
        }
        // Applications the configuration does not name use --keys (its only signing key signs).
        var fallback: SubscriptionSealers.Application?
        if let keys = inputs.keys {
            let signing = keys.signingKeys
            fallback = .init(keys: keys, signer: try JWSSigner(key: signing.count == 1 ? signing[0] : serviceKey))
        }
        let sealers = try PreparedApplication.sealers(applications, serviceKey: serviceKey, fallback: fallback)

        var byID: [String: Subscription] = [:]
        var order: [String] = []
        func add(_ subscription: Subscription) {
            if byID.updateValue(subscription, forKey: subscription.id) == nil { order.append(subscription.id) }
        }
        for subscription in stored { add(subscription) }
        for (index, line) in inputs.subscriptionLines.enumerated() where !line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) {
            do {
                add(try subscription(line, applications: applications, fallbackKeys: inputs.keys))
            } catch let error as RequestError {
                throw ReplayError.subscriptionLine(index + 1, error.message)
            }
        }
        var handles: Int64 = 0
        let all = order.map { id -> Subscription in
            handles += 1
            var subscription = byID[id]!
            subscription.handle = handles
            return subscription
        }
        let settings = applications.mapValues(\.settings)
        return ReplaySession(
            pipeline: RecordPipeline(settings: { settings[$0] ?? .standard }), subscriptions: InMemorySubscriptions(all),
            builder: NotificationBuilder(sealers: sealers), notes: notes)
    }

    /// A subscription document with its `app` and `uid`, checked as the REST API checks it
    /// (with the application's webhooks and keys when the configuration names it). It may carry
    /// `auth`, the read rules' `auth` as the subscriber's token gives it (`{"uid": …, "token":
    /// {claims}}`); absent, `{"uid": uid}`.
    static func subscription(_ line: [UInt8], applications: [String: PreparedApplication], fallbackKeys: KeyRing?) throws -> Subscription {
        var json: JSON
        do {
            json = try JSONParser.parse(line)
        } catch {
            throw RequestError(.undecodable, error.description)
        }
        var claims: JSON?
        if case .object(let object) = json, let auth = object[Key("auth")] {
            json = .object(object.removing(Key("auth")))
            guard case .object(let members) = auth else { throw RequestError(.invalid, "auth: expected {\"uid\": …, \"token\": {claims}}") }
            for (key, _) in members where key.string != "uid" && key.string != "token" {
                throw RequestError(.invalid, "auth: unknown member \(key.string); expected uid and token (the token's claims)")
            }
            if let authUID = members[Key("uid")], authUID != json["uid"] {
                throw RequestError(.invalid, "auth.uid differs from the document's uid")
            }
            if let token = members[Key("token")] {
                guard Subscription.claimsFit(token) else {
                    throw RequestError(.invalid, "auth.token: expected the claims object, at most \(Subscription.maxAuthBytes) bytes")
                }
                claims = token
            }
        }
        guard case .string(let app)? = json["app"] else { throw RequestError(.missing, "app: missing; each document names its application") }
        guard case .string(let uid)? = json["uid"], !uid.isEmpty else { throw RequestError(.missing, "uid: missing; each document names its user") }
        try AppID.validate(app, field: "app")
        let request = try SubscriptionRequest.decode(json, app: app, uid: uid)
        if let application = applications[app] {
            try application.rules.check(request)
        } else if let encryption = request.encryption {
            try EventSealerFactory(keys: fallbackKeys ?? KeyRing([])).checkEncryption(encryption)
        }
        let tuple = request.tuple(app: app, uid: uid)
        return Subscription(
            id: SubscriptionID.derive(tuple), tuple: tuple, mode: request.mode, format: request.format, encryption: request.encryption,
            createdAt: 0, expiresAt: request.expiration ?? 0, auth: claims)
    }

    /// Replays one line: appends one output line per notification (each ending in a newline)
    /// to `out`; returns the reason when the line is not a valid record (it is then skipped).
    public mutating func replay(_ line: [UInt8], into out: inout JSONWriter) async throws -> RecordError? {
        switch checker.check(line, source: "replay") {
        case .failure(let error):
            return error
        case .success(let record):
            let notices = try await pipeline.process(record, lookup: subscriptions, directory: subscriptions, now: clock.now).notices
            for notice in notices {
                let subscription = notice.subscription
                let start = out.count
                out.raw("{\"seq\":")
                out.write(.int(record.seq))
                out.raw(",\"subscription\":")
                out.writeString(subscription.id)
                out.raw(",\"kind\":")
                out.writeString(subscription.kind.rawValue)
                out.raw(",\"context\":")
                if let context = subscription.tuple.context { out.writeString(context) } else { out.raw("null") }
                out.raw(",\"destination\":")
                if let destination = subscription.tuple.destination { out.writeString(destination) } else { out.raw("null") }
                out.raw(",\"payload\":")
                do {
                    try builder.write(notice, into: &out)
                } catch {
                    out.truncate(to: start)
                    notes.append("seq \(record.seq): no payload for subscription \(subscription.id): \(error)")
                    continue
                }
                out.raw("}\n")
            }
            return nil
        }
    }
}

extension ReplaySession {
    /// Replays the change stream in the file at `path`, one output line per notification on
    /// standard output; each invalid line is reported through `report` (its number and why)
    /// and skipped, as are the session's notes. Returns how many lines were invalid.
    public mutating func replayFile(_ path: String, report: (String) -> Void) async throws -> Int {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else {
            throw LineIOError("cannot read the change stream \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var output = OutputBuffer(descriptor: 1)
        var writer = JSONWriter(capacity: 1 << 16)
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var lineNumber = 0
        var invalid = 0
        var reported = notes.count
        func handle(_ line: [UInt8]) async throws {
            lineNumber += 1
            writer.removeAll()
            if let error = try await replay(line, into: &writer) {
                invalid += 1
                report("line \(lineNumber): \(error.reason)")
            }
            writer.withUnsafeBytes { output.bytes.append(contentsOf: $0) }
            for note in notes.dropFirst(reported) { report("pushdispatch replay: \(note)") }
            reported = notes.count
            if output.bytes.count > 1 << 16 { try output.flush() }
        }
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw LineIOError("reading \(path) failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            pending.append(contentsOf: chunk[0..<count])
            var start = 0
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                try await handle(Array(pending[start..<newline]))
                start = newline + 1
            }
            pending.removeSubrange(0..<start)
        }
        if !pending.isEmpty { try await handle(pending) }
        try output.flush()
        return invalid
    }
}

/// `replay` cannot run: which input is at fault and why.
public struct ReplayError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is at fault: compare with the static members.
    public struct Kind: Sendable, Hashable {
        private enum Code: Sendable, Hashable { case subscriptionLine }
        private let code: Code

        /// A line of `--subscriptions` is not a valid subscription document.
        public static let subscriptionLine = Kind(code: .subscriptionLine)
    }

    public let kind: Kind
    /// The line at fault (1-based).
    public let line: Int
    /// What is wrong with it.
    public let reason: String

    static func subscriptionLine(_ line: Int, _ reason: String) -> ReplayError {
        ReplayError(kind: .subscriptionLine, line: line, reason: reason)
    }

    public var description: String { "subscriptions line \(line): \(reason)" }

    /// Equal when of the same kind (the context is for people).
    public static func == (lhs: ReplayError, rhs: ReplayError) -> Bool { lhs.kind == rhs.kind }
}
