import PushCore
import PushJSON
import PushMatching

/// The index as the records of a batch see it while they are staged: the lookup, less the
/// subscriptions that earlier records revoked, with the admissions they made (and those of a
/// batch still committing, whose effects are not applied yet). It gathers the batch's own
/// ``IndexEffects``, which are applied once the batch committed.
///
/// Empty (the common case: a batch that revokes and admits nothing), every read goes straight
/// to the lookup.
public struct IndexOverlay: Sendable {
    /// This batch's effects, to apply once it committed.
    public private(set) var effects = IndexEffects()
    /// Handles forgotten, this batch's and the committing batch's.
    var forgotten: Set<Int64> = []
    /// Admissions made, this batch's and the committing batch's: the latest of each handle
    /// (made on the first: an overlay that admits nothing allocates nothing).
    var admitted: AccessIndex?

    public init() {}

    /// An overlay for a batch staged while `committing`, an earlier batch's effects, are not
    /// applied yet (it commits meanwhile): its records see them too.
    public init(after committing: IndexEffects) {
        // Admissions first: a subscription is never admitted after it was forgotten.
        for admission in committing.admitted { record(admission) }
        for (_, match) in committing.forgotten { note(forgotten: match.handle) }
    }

    /// Nothing forgotten or admitted: the lookup as it is.
    public var isEmpty: Bool { forgotten.isEmpty && (admitted?.count ?? 0) == 0 }

    private mutating func note(forgotten handle: Int64) {
        forgotten.insert(handle)
        admitted?.forget(handle)
    }

    private mutating func record(_ admission: IndexEffects.Admission) {
        if admitted == nil { admitted = AccessIndex() }
        admitted?.admit(admission.handle, app: admission.app, path: admission.path, auth: admission.auth, reads: admission.reads)
    }

    // MARK: - Effects

    /// Forgets subscriptions a record revoked: the records after it do not reach them (their
    /// read access neither).
    public mutating func forget(app: String, _ matches: [IndexMatch]) {
        for match in matches {
            effects.forgotten.append((app, match))
            note(forgotten: match.handle)
        }
    }

    /// Records an evaluation that allowed a subscription (not one forgotten already).
    public mutating func admit(_ handle: Int64, app: String, path: Path, auth: JSON, reads: [Path]) {
        guard !forgotten.contains(handle) else { return }
        let admission = IndexEffects.Admission(handle: handle, app: app, path: path, auth: auth, reads: reads)
        effects.admitted.append(admission)
        record(admission)
    }

    // MARK: - The lookup as staged records see it

    /// Whether a record of this batch (or of the committing one) revoked the subscription.
    public func isForgotten(_ handle: Int64) -> Bool { forgotten.contains(handle) }

    /// ``SubscriptionLookup/concerned(app:path:)`` less the forgotten.
    public func concerned(app: String, path: Path, in lookup: some SubscriptionLookup) -> [IndexMatch] {
        let found = lookup.concerned(app: app, path: path)
        return forgotten.isEmpty ? found : found.filter { !forgotten.contains($0.handle) }
    }

    /// ``SubscriptionLookup/under(app:path:)`` less the forgotten.
    public func under(app: String, path: Path, in lookup: some SubscriptionLookup) -> [IndexMatch] {
        let found = lookup.under(app: app, path: path)
        return forgotten.isEmpty ? found : found.filter { !forgotten.contains($0.handle) }
    }

    /// ``SubscriptionLookup/accessAffected(app:path:)`` less the forgotten, with the admissions
    /// made here in place of the lookup's of the same subscriptions.
    public func accessAffected(app: String, path: Path, in lookup: some SubscriptionLookup) -> [Int64] {
        var found = lookup.accessAffected(app: app, path: path)
        if isEmpty { return found }
        found.removeAll { forgotten.contains($0) || admitted?.isAdmitted($0) == true }
        if let admitted { found += admitted.affected(app: app, path: path) }
        return found
    }

    /// ``SubscriptionLookup/accessEntry(_:)``: the admission made here, if any.
    public func accessEntry(_ handle: Int64, in lookup: some SubscriptionLookup) -> AccessIndex.Entry? {
        if isEmpty { return lookup.accessEntry(handle) }
        if forgotten.contains(handle) { return nil }
        if let admitted, admitted.isAdmitted(handle) { return admitted.entry(handle) }
        return lookup.accessEntry(handle)
    }

    /// ``SubscriptionLookup/isAdmitted(_:)``, with the admissions made here.
    public func isAdmitted(_ handle: Int64, in lookup: some SubscriptionLookup) -> Bool {
        if isEmpty { return lookup.isAdmitted(handle) }
        if forgotten.contains(handle) { return false }
        return admitted?.isAdmitted(handle) == true || lookup.isAdmitted(handle)
    }
}
