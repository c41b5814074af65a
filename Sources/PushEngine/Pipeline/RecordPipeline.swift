import PushCore
import PushJSON
import PushMatching

/// One notification a record leads to: the subscription as stored, and what it is told.
public struct Notice: Sendable {
    public let subscription: Subscription
    public let event: Event

    public init(subscription: Subscription, event: Event) {
        self.subscription = subscription
        self.event = event
    }

    /// Whether the notice revokes its subscription (which is then deleted).
    public var revokes: Bool {
        if case .revoke = event.body { return true }
        return false
    }
}

/// Change records in, notifications out: the matching and event rules of SPEC §4 and §6 over
/// the trees, the index and the stored subscriptions. Pure: the record engine (PushEngine)
/// checks lines before they get here (their length, their JSON, their `seq`) and stores what
/// comes out; `replay` prints it.
public struct RecordPipeline: Sendable {
    public var processor: RecordProcessor
    /// Each application's settings; applications absent from the configuration get
    /// ``PipelineSettings/standard`` (their trees are kept like any other, SPEC §11.2).
    public let settings: @Sendable (String) -> PipelineSettings

    public init(processor: RecordProcessor = RecordProcessor(), settings: @escaping @Sendable (String) -> PipelineSettings) {
        self.processor = processor
        self.settings = settings
    }

    /// A record applied, its notices not yet resolved against the stored subscriptions: the
    /// record engine resolves a whole batch's in one read of the directory.
    public struct Staged: Sendable {
        /// The record changed its application's tree (it is journalled).
        public var changedTree: Bool
        public var notices: PendingNotices
    }

    /// The notices of an accepted record: events for subscriptions known by handle (a write's),
    /// or notices already resolved (a revocation record's, which needs the documents to filter
    /// by uid).
    public struct PendingNotices: Sendable {
        public var events: [(handle: Int64, event: Event)] = []
        public var resolved: [Notice] = []

        public init() {}

        public var isEmpty: Bool { events.isEmpty && resolved.isEmpty }

        /// The handles to read from the directory.
        public var handles: [Int64] { events.map(\.handle) }

        /// The notices, in delivery order (by subscription id, byte order), given the stored
        /// subscriptions: a subscription missing from `stored` was removed meanwhile and is
        /// not told.
        public func resolve(_ stored: [Int64: Subscription]) -> [Notice] {
            var notices = resolved
            for (handle, event) in events {
                guard let subscription = stored[handle] else { continue }
                notices.append(Notice(subscription: subscription, event: event))
            }
            if notices.count > 1 { notices.sort { lexicographicCompareUTF8($0.subscription.id, $1.subscription.id) < 0 } }
            return notices
        }
    }

    /// Applies one record, its effects on the index included (there is no batch to commit:
    /// `replay`, tests); returns whether it changed its tree and its notices, in delivery order
    /// (by subscription id, byte order). Throws only when the directory cannot be read; then
    /// nothing changed, and the caller may apply the record again.
    public mutating func process(
        _ record: ChangeRecord, lookup: some SubscriptionLookup, directory: some SubscriptionDirectory, now: Int64, sourceBytes: Int? = nil
    ) async throws -> (changedTree: Bool, notices: [Notice]) {
        var overlay = IndexOverlay()
        let staged = try await stage(
            record, lookup: lookup, directory: directory, overlay: &overlay, resolving: true, now: now, sourceBytes: sourceBytes)
        lookup.apply(overlay.effects)
        return (staged.changedTree, staged.notices.resolve([:]))
    }

    /// ``stage(_:lookup:directory:overlay:resolving:now:sourceBytes:)`` for a write whose
    /// application's rules read no data (nothing to read from the directory), without
    /// suspending: `nil` for any other record, which goes through `stage`.
    public mutating func stageWrite(
        _ record: ChangeRecord, lookup: some SubscriptionLookup, overlay: inout IndexOverlay, sourceBytes: Int? = nil
    ) -> Staged? {
        guard case .write(let write) = record.operation else { return nil }
        let settings = settings(record.app)
        if let rules = settings.rules, rules.rechecked { return nil }
        let effects = processor.effects(
            of: write, app: record.app, concerned: { overlay.concerned(app: record.app, path: write.path, in: lookup) }, settings: settings,
            sourceBytes: sourceBytes)
        var pending = PendingNotices()
        if !effects.events.isEmpty {
            pending.events = effects.events.map { (handle: $0.0.handle, event: $0.1) }
            let revoked = effects.events.filter { if case .revoke = $0.1.body { return true } else { return false } }.map(\.0)
            if !revoked.isEmpty { overlay.forget(app: record.app, revoked) }
        }
        let changed = !effects.changed.isEmpty
        if changed { processor.setTree(effects.after, app: record.app) }
        return Staged(changedTree: changed, notices: pending)
    }

    /// Applies one record to the trees; what it does to the index goes into `overlay` (the
    /// records after it see it there; its ``IndexOverlay/effects`` are applied once the batch
    /// committed). A write's notices are left unresolved unless `resolving`; the directory is
    /// read (before anything changes: if it throws, nothing did, `overlay` included, unless
    /// `resolving`) for a revocation record, for a write when `resolving`, and for the claims of
    /// subscriptions whose read access a write must check first. `now` (milliseconds since the
    /// epoch) is the rules' `now`.
    ///
    /// `sourceBytes` is the length of the line the record was read from, when known: it bounds
    /// the weight of what a put writes (``RecordProcessor/effects(of:app:lookup:settings:sourceBytes:)``).
    public mutating func stage(
        _ record: ChangeRecord, lookup: some SubscriptionLookup, directory: some SubscriptionDirectory, overlay: inout IndexOverlay,
        resolving: Bool = false, now: Int64, sourceBytes: Int? = nil
    ) async throws -> Staged {
        if !resolving, let staged = stageWrite(record, lookup: lookup, overlay: &overlay, sourceBytes: sourceBytes) { return staged }
        var changedTree = false
        var pending = PendingNotices()
        switch record.operation {
        case .write(let write):
            let settings = settings(record.app)
            let effects = processor.effects(
                of: write, app: record.app, concerned: { overlay.concerned(app: record.app, path: write.path, in: lookup) }, settings: settings,
                sourceBytes: sourceBytes)
            let after = effects.after
            let changed = !effects.changed.isEmpty
            var events = effects.events
            if changed, let rules = settings.rules, rules.rechecked {
                events = try await Self.checkingAccess(
                    effects, app: record.app, rules: rules, lookup: lookup, overlay: &overlay, directory: directory, now: now)
            }
            changedTree = changed
            if !events.isEmpty {
                if resolving {
                    let stored = try await directory.subscriptions(handles: events.map(\.0.handle))
                    for (match, event) in events {
                        guard let subscription = stored[match.handle] else { continue }  // removed meanwhile
                        pending.resolved.append(Notice(subscription: subscription, event: event))
                    }
                } else {
                    pending.events = events.map { (handle: $0.0.handle, event: $0.1) }
                }
                let revoked = events.filter { if case .revoke = $0.1.body { return true } else { return false } }.map(\.0)
                if !revoked.isEmpty { overlay.forget(app: record.app, revoked) }
            }
            if changed { processor.setTree(after, app: record.app) }
        case .revoke(let path, let uid, let reason):
            let candidates = overlay.under(app: record.app, path: path ?? .root, in: lookup)
            if !candidates.isEmpty {
                let stored = try await directory.subscriptions(handles: candidates.map(\.handle))
                var revoked: [IndexMatch] = []
                for match in candidates {
                    guard let subscription = stored[match.handle], uid.map({ utf8Equal(subscription.uid, $0) }) ?? true else { continue }
                    revoked.append(match)
                    pending.resolved.append(
                        Notice(subscription: subscription, event: Event(app: record.app, path: subscription.path.string, body: .revoke(reason))))
                }
                if !revoked.isEmpty { overlay.forget(app: record.app, revoked) }
            }
        }
        return Staged(changedTree: changedTree, notices: pending)
    }

    /// A write's events once the read access it may have changed is checked against the tree
    /// after it (SPEC §12.5): the admitted subscriptions whose evaluation read a value the
    /// write changed, and the subscriptions it concerns that were never evaluated against this
    /// data (created meanwhile). A denied one is revoked with `permission_denied` instead of
    /// receiving the record's event; an allowed one is admitted with what its evaluation read
    /// (into `overlay`, after the directory was read: if that throws, `overlay` is unchanged).
    static func checkingAccess(
        _ effects: WriteEffects, app: String, rules: ReadRules, lookup: some SubscriptionLookup, overlay: inout IndexOverlay,
        directory: some SubscriptionDirectory, now: Int64
    ) async throws -> [(IndexMatch, Event)] {
        var candidates: [Int64: Path] = [:]
        for target in effects.changed {
            for handle in overlay.accessAffected(app: app, path: target, in: lookup) {
                if let entry = overlay.accessEntry(handle, in: lookup) { candidates[handle] = entry.path }
            }
        }
        var unadmitted: [Int64] = []
        if rules.readsNow {
            // Rules with `now`: every subscription the write reaches, at this record's time
            // (one admitted without reads kept no claims: they are read with the others).
            for (match, _) in effects.events where overlay.isAdmitted(match.handle, in: lookup) && candidates[match.handle] == nil {
                if let entry = overlay.accessEntry(match.handle, in: lookup) {
                    candidates[match.handle] = entry.path
                } else {
                    unadmitted.append(match.handle)
                    candidates[match.handle] = match.path
                }
            }
        }
        for (match, _) in effects.events where !overlay.isAdmitted(match.handle, in: lookup) && candidates[match.handle] == nil {
            unadmitted.append(match.handle)
            candidates[match.handle] = match.path
        }
        if candidates.isEmpty { return effects.events }
        // The claims: remembered for the admitted, read for the others (before anything changes).
        let stored = unadmitted.isEmpty ? [:] : try await directory.subscriptions(handles: unadmitted)
        var denied: [(handle: Int64, path: Path)] = []
        for (handle, path) in candidates.sorted(by: { $0.key < $1.key }) {
            let auth: JSON
            if let entry = overlay.accessEntry(handle, in: lookup) {
                auth = entry.auth
            } else if let subscription = stored[handle] {
                auth = ReadRules.auth(uid: subscription.uid, claims: subscription.auth)
            } else {
                continue  // removed meanwhile: it is told nothing anyway
            }
            let decision = rules.evaluate(path: path, auth: auth, tree: effects.after, now: now)
            if decision.allowed {
                overlay.admit(handle, app: app, path: path, auth: auth, reads: decision.reads)
            } else {
                denied.append((handle, path))
            }
        }
        guard !denied.isEmpty else { return effects.events }
        let revoked = Set(denied.map(\.handle))
        var events = effects.events.filter { !revoked.contains($0.0.handle) }
        for (handle, path) in denied {
            events.append((IndexMatch(handle: handle, mode: .noData, path: path), Event(app: app, path: path.string, body: .revoke(.permissionDenied))))
        }
        return events
    }
}
