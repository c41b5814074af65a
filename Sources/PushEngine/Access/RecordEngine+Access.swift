import Logging
import PushContracts
import PushCore
import PushJSON
import PushMatching

/// Read access (SPEC §12.5): every subscription's access is evaluated against the data it sees
/// before a record reaches it. A write re-evaluates the subscriptions whose evaluation read what
/// it changed (``RecordPipeline``); these evaluate the others:
///
/// - **admissions**: subscriptions created or changed (new claims) since the last batch,
///   against the trees as they are now;
/// - **audits**: every subscription of an application with rules, when its tree is loaded (at
///   start; when an owner takes the application), so that changed rules, and data changed
///   while the subscription was not followed, apply.
///
/// Denied subscriptions are revoked with `permission_denied` (their revoke notification goes
/// out, they are deleted); allowed ones are admitted with what their evaluation read.
extension RecordEngine {
    /// Evaluates the subscriptions waiting for their admission (handle → application), but
    /// those a batch still committing revoked.
    mutating func admit(_ waiting: [Int64: String], into prepared: inout PreparedBatch, overlay: inout IndexOverlay, now: Int64) async throws {
        let handles = waiting.filter { trackedRules($0.value) != nil && !overlay.isForgotten($0.key) }.map(\.key)
        guard !handles.isEmpty else { return }
        let stored = try await retryingIngestion("reading subscriptions", logger: logger) { try await registry.subscriptions(handles: handles) }
        let subscriptions = stored.values.sorted { lexicographicCompareUTF8($0.id, $1.id) < 0 }
        evaluate(subscriptions, into: &prepared, overlay: &overlay, now: now)
    }

    /// Every subscription of `app` evaluated against the application's tree, a page of
    /// ``auditPage`` at a time; `commit` receives each page's revocations and admissions (a
    /// page with neither is not handed over). Applications without configured rules have
    /// nothing to audit.
    public mutating func audit(
        app: String, store: any SubscriptionStore, now: Int64, commit: (PreparedBatch) async throws -> Void
    ) async throws {
        var next: Int64? = 0
        while let after = next {
            let (prepared, following) = try await audit(app: app, after: after, store: store, now: now)
            if !prepared.batch.isEmpty || !prepared.effects.isEmpty { try await commit(prepared) }
            next = following
        }
    }

    /// One page of ``audit(app:store:now:commit:)``: the subscriptions after `handle`; the
    /// revocations to commit and where the next page starts (`nil` after the last).
    mutating func audit(app: String, after handle: Int64, store: any SubscriptionStore, now: Int64) async throws
        -> (PreparedBatch, next: Int64?)
    {
        var prepared = PreparedBatch(batch: CommitBatch(now: now), intake: CheckedLines())
        guard settings[app]?.rules != nil else { return (prepared, nil) }
        let page = try await retryingIngestion("reading subscriptions", logger: logger) {
            try await store.subscriptions(app: app, after: handle, limit: Self.auditPage)
        }
        var overlay = IndexOverlay()
        evaluate(page, into: &prepared, overlay: &overlay, now: now)
        prepared.effects = overlay.effects
        return (prepared, page.count < Self.auditPage ? nil : page.last?.handle)
    }

    static let auditPage = 1_000

    /// The applications an audit looks at: those with configured rules.
    public var auditedApplications: [String] {
        settings.filter { $0.value.rules != nil }.keys.sorted()
    }

    /// Evaluates each subscription against its application's tree: admitted (rules that read
    /// data) or revoked with `permission_denied`, in `overlay` (applied once the batch committed).
    mutating func evaluate(_ subscriptions: [Subscription], into prepared: inout PreparedBatch, overlay: inout IndexOverlay, now: Int64) {
        for subscription in subscriptions {
            guard let rules = settings[subscription.app]?.rules, let handle = subscription.handle else { continue }
            let auth = ReadRules.auth(uid: subscription.uid, claims: subscription.auth)
            let tree = pipeline.processor.trees[subscription.app] ?? DataTree()
            let decision = rules.evaluate(path: subscription.path, auth: auth, tree: tree, now: now)
            if decision.allowed {
                if rules.rechecked { overlay.admit(handle, app: subscription.app, path: subscription.path, auth: auth, reads: decision.reads) }
                continue
            }
            logger.info(
                "a subscription may no longer read its node: revoked (permission_denied)",
                metadata: ["app": "\(subscription.app)", "subscription": "\(subscription.id)", "path": "\(subscription.path)"])
            overlay.forget(app: subscription.app, [IndexMatch(handle: handle, mode: subscription.mode, path: subscription.path)])
            let notice = Notice(
                subscription: subscription, event: Event(app: subscription.app, path: subscription.path.string, body: .revoke(.permissionDenied)))
            append(notice, seq: nil, to: &prepared)
        }
    }
}
