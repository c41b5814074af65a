import PushCore
import PushJSON
import PushMatching

/// What an application's configuration says to the pipeline.
public struct PipelineSettings: Sendable {
    /// `subscriptions.maxWeight`: a subscription whose value grows beyond it is revoked with
    /// reason `too_big` (SPEC §11.4).
    public var maxWeight: Int
    /// The configured read rules (SPEC §12): a subscription that may no longer read its node is
    /// revoked with reason `permission_denied`. `nil`: the default, which grants every
    /// authenticated subscriber and reads no data, so nothing is ever checked again.
    public var rules: ReadRules?
    /// `webpush.notification`: the notification Web Push subscribers' browsers show
    /// (Declarative Web Push, issue 34). `nil`: the data map alone, as before.
    public var webPushNotification: WebPushNotification?

    public static let standard = PipelineSettings(maxWeight: 1 << 20)

    public init(maxWeight: Int, rules: ReadRules? = nil, webPushNotification: WebPushNotification? = nil) {
        self.maxWeight = maxWeight
        self.rules = rules
        self.webPushNotification = webPushNotification
    }
}

/// What a write does: the tree after it, the paths where it changed the tree, and the events
/// of the subscriptions whose value changed.
public struct WriteEffects: Sendable {
    public var after: DataTree
    /// The targets (a put's path, a patch's keys) whose value changed; empty when nothing did.
    public var changed: [Path]
    public var events: [(IndexMatch, Event)]
}

/// The data trees of every application, and what a record does to them and to the
/// subscriptions (SPEC §3, §6). Pure: the index comes in through ``SubscriptionLookup``.
public struct RecordProcessor: Sendable {
    /// By application id. An application whose tree is empty has no entry.
    public private(set) var trees: [String: DataTree]

    public init(trees: [String: DataTree] = [:]) {
        self.trees = trees
    }

    /// What a write does, without doing it: its application's tree after the write, whether it
    /// changed, and, for each concerned subscription whose value changed, its event: a data
    /// event, or a `too_big` revocation when the new value weighs more than `maxWeight`. A patch
    /// is one write: a subscriber gets at most one event for it. ``setTree(_:app:)`` makes it so.
    ///
    /// `sourceBytes`, the length of the record's line, bounds the weight of a put's value and of
    /// every part of it: a subscription at or below the put's path is then not weighed when
    /// the bound is within `maxWeight`.
    public func effects(
        of write: TreeWrite, app: String, lookup: some SubscriptionLookup, settings: PipelineSettings, sourceBytes: Int? = nil
    ) -> WriteEffects {
        effects(of: write, app: app, concerned: { lookup.concerned(app: app, path: write.path) }, settings: settings, sourceBytes: sourceBytes)
    }

    /// ``effects(of:app:lookup:settings:sourceBytes:)`` with the subscriptions the write
    /// concerns found by `concerned` (called once, only when the write changes the tree).
    public func effects(
        of write: TreeWrite, app: String, concerned: () -> [IndexMatch], settings: PipelineSettings, sourceBytes: Int? = nil
    ) -> WriteEffects {
        let before = trees[app] ?? DataTree()
        // A write changes the tree exactly where it changes the value at one of its targets
        // (the path of a put, each key of a patch): comparing there costs the size of the
        // values written, where comparing whole trees would cost the size of their ancestors.
        let targets: [(path: Path, value: JSON?)]
        switch write {
        case .put(let path, let value): targets = [(path, value)]
        case .patch(let path, let updates): targets = updates.map { (path.appending($0.keys), $0.value) }
        }
        let previous = targets.map { before.value(at: $0.path) }
        let changed = zip(targets, previous).filter { $0.value != $1 }.map(\.0.path)
        if changed.isEmpty { return WriteEffects(after: before, changed: [], events: []) }
        let after = before.applying(write)
        // A put's value is what the tree holds at its path after it (and what was there before
        // is known): a subscription exactly there needs no lookup in either tree.
        var put: (path: Path, value: JSON?, previous: JSON?, light: Bool)?
        if case .put(let path, let value) = write {
            let light = sourceBytes.map { JSON.compactLengthBound(sourceBytes: $0) <= settings.maxWeight } ?? false
            put = (path, value, previous[0], light)
        }
        var events: [(IndexMatch, Event)] = []
        for match in concerned() {
            // At or above a changed target: changed. Below one: compare. Elsewhere: untouched.
            let new: JSON?
            let old: JSON?
            if let put, put.path == match.path {
                (new, old) = (put.value, put.previous)
            } else {
                (new, old) = (after.value(at: match.path), before.value(at: match.path))
            }
            if !changed.contains(where: { match.path.isPrefix(of: $0) }) {
                guard changed.contains(where: { $0.isPrefix(of: match.path) }), old != new else { continue }
            }
            // At or below a put's path, the value is part of the put's: the line's length
            // bounds its weight.
            let weighed = !(put.map { $0.light && $0.path.isPrefix(of: match.path) } ?? false)
            if weighed, let new, new.compactLength(limit: settings.maxWeight) == nil {
                events.append((match, Event(app: app, path: match.path.string, body: .revoke(.tooBig))))
                continue
            }
            if let event = Event.changed(app: app, path: match.path.string, mode: match.mode, before: old, after: new) {
                events.append((match, event))
            }
        }
        return WriteEffects(after: after, changed: changed, events: events)
    }

    /// Replaces an application's tree (after a write, or when resuming from a snapshot).
    public mutating func setTree(_ tree: DataTree, app: String) {
        trees[app] = tree.root == nil ? nil : tree
    }
}
