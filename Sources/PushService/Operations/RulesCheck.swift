import Foundation
import Logging
import PushCore
import PushEngine
import PushJSON
import PushMatching
import PushStore

/// `pushdispatch rules check` (SPEC §12): before deploying rules, which subscriptions they
/// would revoke; and, as the Firebase rules simulator does, whether an `auth` may read one path,
/// rule by rule. Reads the configured store (SQLite: only if it exists; never written).
public enum RulesCheck {
    /// A subscription the rules would revoke.
    public struct Revocation: Sendable {
        public var app: String
        public var id: String
        public var uid: String
        public var path: Path
        public var kind: SubscriptionKind
    }

    /// What the rules would do to one application's subscriptions.
    public struct Audit: Sendable {
        public var app: String
        public var checked = 0
        public var revoked: [Revocation] = []
    }

    /// Evaluates every subscription of the applications with rules (the configured ones, or
    /// `replacing` them) against the stored data, as a start of the service would.
    public static func audit(_ configuration: ServiceConfiguration, replacing: [String: ReadRules] = [:], now: Int64) async throws -> [Audit] {
        let store = try await open(configuration)
        defer { store.close() }
        var rules: [String: ReadRules] = [:]
        for (id, app) in configuration.apps { if let configured = app.rules { rules[id] = configured.rules } }
        rules.merge(replacing) { $1 }
        var audits: [Audit] = []
        for app in rules.keys.sorted() {
            let rule = rules[app]!
            let tree = rule.readsData ? try await TreeLoader.tree(app: app, from: store).tree : DataTree()
            var audit = Audit(app: app)
            var after: Int64 = 0
            while true {
                let page = try await store.subscriptions(app: app, after: after, limit: 1_000)
                guard let last = page.last else { break }
                for subscription in page {
                    audit.checked += 1
                    let auth = ReadRules.auth(uid: subscription.uid, claims: subscription.auth)
                    if !rule.evaluate(path: subscription.path, auth: auth, tree: tree, now: now).allowed {
                        audit.revoked.append(
                            Revocation(app: app, id: subscription.id, uid: subscription.uid, path: subscription.path, kind: subscription.kind))
                    }
                }
                after = last.handle ?? after
            }
            audits.append(audit)
        }
        return audits
    }

    /// Whether `auth` may read `path` of `app` now, rule by rule.
    public static func simulate(_ configuration: ServiceConfiguration, app: String, rules: ReadRules, path: Path, auth: JSON?, now: Int64)
        async throws -> AccessDecision
    {
        guard rules.readsData else { return rules.evaluate(path: path, auth: auth, tree: DataTree(), now: now) }
        let store = try await open(configuration)
        defer { store.close() }
        let tree = try await TreeLoader.tree(app: app, from: store).tree
        return rules.evaluate(path: path, auth: auth, tree: tree, now: now)
    }

    /// The configured store, for reading (SQLite: it must exist; it is not written).
    static func open(_ configuration: ServiceConfiguration) async throws -> any RuntimeStore {
        switch configuration.store {
        case .sqlite(let path):
            guard FileManager.default.fileExists(atPath: path) else {
                throw ConfigurationError("store.sqlite", .unreadable, "\(path) does not exist: there is nothing to check yet")
            }
            return try SQLiteStore(readingOnly: path)
        case .postgres:
            return try await Deployments.openStore(configuration, logger: StoreCommands.quietLogger())
        }
    }
}
