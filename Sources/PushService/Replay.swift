import Foundation
import PushCore
import PushJOSE
import PushStore

/// `pushdispatch replay --dry-run` (SPEC §7.6, §11.12): a change stream through the service's
/// own pipeline (the same ``RecordPipeline`` and ``NotificationBuilder``), starting from empty
/// trees, printing each notification instead of storing it.
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
                throw ReplayError("subscriptions line \(index + 1): \(error.message)")
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
    /// (with the application's webhooks and keys when the configuration names it).
    static func subscription(_ line: [UInt8], applications: [String: PreparedApplication], fallbackKeys: KeyRing?) throws -> Subscription {
        let json: JSON
        do {
            json = try JSONParser.parse(line)
        } catch {
            throw RequestError(error.description)
        }
        guard case .string(let app)? = json["app"] else { throw RequestError("app: missing; each document names its application") }
        guard case .string(let uid)? = json["uid"], !uid.isEmpty else { throw RequestError("uid: missing; each document names its user") }
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
            createdAt: 0, expiresAt: request.expiration ?? 0)
    }

    /// Replays one line: appends one output line per notification (each ending in a newline)
    /// to `out`; returns the reason when the line is not a valid record (it is then skipped).
    public mutating func replay(_ line: [UInt8], into out: inout JSONWriter) async throws -> RecordError? {
        let outcome = try await pipeline.process(line, source: "replay", lookup: subscriptions, directory: subscriptions)
        switch outcome {
        case .rejected(let error):
            return error
        case .accepted(let record, _, let notices):
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

/// `replay` cannot run: the message says why.
public struct ReplayError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
