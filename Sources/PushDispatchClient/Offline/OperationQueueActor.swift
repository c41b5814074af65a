import Foundation
import PushJSON

/// The offline queue: the operations waiting, their file, and the one task that sends them, in
/// order, one at a time.
///
/// Every change is stored before the call that made it returns (the store is synchronous, so
/// the actor never interleaves two changes). An operation is marked as attempted, and stored,
/// before it is handed to the network: after a crash, the queue knows that the service may
/// have applied it.
actor OperationQueueActor {
    let app: String
    let configuration: OfflineQueueConfiguration
    let store: any OperationQueueStore
    let executor: OperationExecutor
    /// The device token: read, and replaced by a token update, here in one step with queuing.
    let device: DeviceRegistration
    /// The queue file's lock, held while this queue lives: one queue per file.
    private var lock: FileLock?

    private var operations: [PendingOperation] = []
    /// `nil` until the store was read; the error of a document that cannot be read, kept until
    /// ``discardAll()``.
    private var loaded: Result<Void, PushClientError>?
    /// The operation on the network.
    private var sending: String?
    private var task: Task<Void, Never>?
    /// Failures in a row (for the back-off), and what the last one met.
    private var failures = 0
    private var lastError: PushClientError?
    private var nextAttempt: Date?
    /// Set by a 401 that fresh credentials did not cure: nothing is sent until
    /// ``credentialsChanged()``.
    private var suspended: PushClientError?
    /// Who waits for the attempt on the network to end.
    private var attemptWaiters: [CheckedContinuation<Void, Never>] = []
    private var wake: CheckedContinuation<Void, Never>?
    private var timer: Task<Void, Never>?
    /// Which pause a timer belongs to: a timer of a pause cut short wakes nothing later.
    private var pauses = 0
    /// How many times the app said its credentials changed.
    private var credentials = 0
    /// Set when the ``PushDispatch`` ended.
    private var closed = false
    /// Why the store could not be read or locked, until it can.
    private var storeProblem: PushClientError?

    /// Final states of the operations this process saw end, and where merged ones went.
    private var finished: [String: QueuedOperation.State] = [:]
    private var finishedOrder: [String] = []
    private var forwards: [String: String] = [:]
    private var waiters: [String: [CheckedContinuation<QueuedOperation.State, Never>]] = [:]
    private var observers: [UUID: AsyncStream<QueuedOperation.Update>.Continuation] = [:]

    /// Final states remembered, for handles asked late.
    static let rememberedStates = 4096

    init(app: String, configuration: OfflineQueueConfiguration, executor: OperationExecutor, device: DeviceRegistration) {
        self.device = device
        self.app = app
        self.configuration = configuration
        self.store =
            configuration.store
            ?? (configuration.isPersistenceEnabled ? FileOperationQueueStore.standard(app: app) : InMemoryOperationQueueStore())
        self.executor = executor
    }

    // MARK: Loading and storing

    /// Reads the store once. A store that failed to read is asked again next time; a document
    /// that could not be read stays refused (nothing is written over it) until ``discardAll()``.
    private func load() throws(PushClientError) {
        switch loaded {
        case .success?: return
        case .failure(let error)?: throw error
        case nil: break
        }
        try takeLock()
        let data: Data?
        do {
            data = try store.loadQueue()
        } catch {
            let failure = (error as? PushClientError)
                ?? PushClientError(.queueStore, "the offline queue's store could not be read: \(Bounded.text(String(describing: error), limit: 200))")
            storeProblem = failure
            throw failure
        }
        do {
            operations = try data.map { bytes throws(PushClientError) in try QueueDocument.decode([UInt8](bytes), app: app) } ?? []
            loaded = .success(())
            storeProblem = nil
        } catch {
            loaded = .failure(error)
            storeProblem = error
            throw error
        }
    }

    /// Takes the queue file's lock, once (a store that is not a file has none to take).
    private func takeLock() throws(PushClientError) {
        guard !closed else { throw PushClientError(.queueStore, "the offline queue was closed with its PushDispatch") }
        guard lock == nil, let exclusive = store as? FileOperationQueueStore else { return }
        do {
            lock = try exclusive.lockExclusively()
        } catch {
            storeProblem = error
            throw error
        }
    }

    private func save(_ candidate: [PendingOperation]) throws(PushClientError) {
        do {
            try store.saveQueue(Data(QueueDocument.encode(app: app, operations: candidate)))
        } catch {
            throw PushClientError(.queueStore, "the offline queue could not be stored: \(Bounded.text(String(describing: error), limit: 200))")
        }
    }

    /// Reads the store and starts sending what it holds.
    func start() {
        do {
            try load()
        } catch {
            lastError = error
            return
        }
        kick()
    }

    // MARK: Queuing

    /// Queues `action` (merged with what it cancels or repeats), stores the queue, and returns
    /// the operation's handle. Throws ``PushClientError/Code/queueFull`` beyond the limit and
    /// ``PushClientError/Code/queueStore`` when it cannot be stored: then nothing changed.
    func enqueue(_ action: PendingOperation.Action) throws(PushClientError) -> QueuedOperation {
        try enqueue(PendingOperation(id: Self.newID(), uid: executor.currentUID(), action: action, attempts: 0))
    }

    /// Queues the operation `make` builds for this device's token as it is now, read in the same
    /// step as queuing: a token update queued meanwhile cannot slip between them.
    func enqueueForDevice(_ make: @Sendable (DeviceToken) -> PendingOperation.Action) throws(PushClientError) -> QueuedOperation {
        guard let token = device.token else {
            throw .invalidArgument("this device has no push token yet: set one (setDeviceToken) before subscribing through notifications")
        }
        return try enqueue(make(token))
    }

    /// Queues the move of every subscription of `former` (by default, the device token now) to
    /// `new`, which becomes the device token once the update is stored. The same token again
    /// (or a first token) moves nothing: the handle is confirmed at once, nothing is queued.
    func enqueueTokenUpdate(_ new: DeviceToken, replacing former: DeviceToken?) throws(PushClientError) -> QueuedOperation {
        guard let old = former ?? device.token, old != new else {
            try load()
            device.set(new)
            let nothing = PendingOperation(id: Self.newID(), uid: executor.currentUID(), action: .updateDeviceToken(from: [new], to: new), attempts: 0)
            finish(nothing.id, .confirmed(nil), kind: nothing.kind)
            return QueuedOperation(nothing, queue: self)
        }
        let handle = try enqueue(.updateDeviceToken(from: [old], to: new))
        device.set(new)
        return handle
    }

    private func enqueue(_ operation: PendingOperation) throws(PushClientError) -> QueuedOperation {
        try load()
        let outcome = OperationMerging.enqueue(operation, into: operations, sending: sending)
        guard outcome.queue.count <= configuration.limit || outcome.queue.count <= operations.count else {
            throw PushClientError(
                .queueFull,
                "the offline queue holds \(operations.count) operations, its limit (OfflineQueueConfiguration.limit): this one was not queued")
        }
        try save(outcome.queue)
        let before = operations
        operations = outcome.queue
        applyForwards(outcome.forwarded)
        let handle = QueuedOperation(operation, queue: self)
        for id in outcome.withdrawn {
            let withdrawn = before.first { $0.id == id }
            finish(id, .cancelled, kind: withdrawn?.kind, path: withdrawn?.path)
        }
        publish(handle, state(of: operation.id))
        kick()
        return handle
    }

    /// Records merges: each `from` ends as its `to` does, and whoever waits for it now waits
    /// for that one. Chains are kept one step long, so that the table holds one entry per
    /// merged operation, forgotten with the operation it points to.
    private func applyForwards(_ merged: [OperationMerging.Outcome.Forward]) {
        for forward in merged {
            let target = resolve(forward.to)
            forwards[forward.from] = target
            for (from, to) in forwards where to == forward.from { forwards[from] = target }
            if let waiting = waiters.removeValue(forKey: forward.from) { waiters[target, default: []] += waiting }
        }
    }

    /// Takes out an operation never sent; see ``QueuedOperation/cancel()``. When it is on the
    /// network, waits for that attempt to end first: one that never reached the service can
    /// still be withdrawn.
    func withdraw(_ id: String) async -> Bool {
        while sending == id {
            await withCheckedContinuation { attemptWaiters.append($0) }
        }
        // An operation merged into another is that one now: withdrawing it would withdraw
        // what the other stands for.
        guard forwards[id] == nil, (try? load()) != nil, id != sending,
            let index = operations.firstIndex(where: { $0.id == id }),
            operations[index].attempts == 0, !operations[index].absorbed, operations[index].kind != .updateDeviceToken
        else { return false }
        var candidate = operations
        let removed = candidate.remove(at: index)
        do {
            try save(candidate)
        } catch {
            lastError = error
            return false
        }
        operations = candidate
        finish(removed.id, .cancelled, kind: removed.kind, path: removed.path)
        return true
    }

    /// Forgets every waiting operation (they end `cancelled`), and a file that could not be
    /// read: what an app does at sign-out, or to start over.
    func discardAll() throws(PushClientError) {
        try takeLock()
        let kept = operations.filter { $0.id == sending }
        try save(kept)
        storeProblem = nil
        let dropped = operations.filter { $0.id != sending }
        operations = kept
        loaded = .success(())
        for operation in dropped { finish(operation.id, .cancelled, kind: operation.kind, path: operation.path) }
    }

    // MARK: What the app sees

    /// Handles of the operations waiting, in the order they will be sent.
    func pending() throws(PushClientError) -> [QueuedOperation] {
        try load()
        return operations.map { QueuedOperation($0, queue: self) }
    }

    func status() -> OfflineQueue.Status {
        OfflineQueue.Status(
            pending: operations.count, sending: sending != nil, suspended: suspended, lastError: lastError, nextAttempt: nextAttempt,
            storeError: storeProblem)
    }

    func state(of id: String) -> QueuedOperation.State {
        let target = resolve(id)
        if let state = finished[target] { return state }
        if let operation = operations.first(where: { $0.id == target }) {
            return .pending(attempts: operation.attempts, lastError: operation.id == operations.first?.id ? lastError : nil)
        }
        // An operation of another process that ended there, or one forgotten long ago.
        return .pending(attempts: 0, lastError: nil)
    }

    func outcome(of id: String) async -> QueuedOperation.State {
        let current = state(of: id)
        if current.isFinal || closed { return current }
        let target = resolve(id)
        guard operations.contains(where: { $0.id == target }) || sending == target else { return current }
        return await withCheckedContinuation { continuation in
            waiters[target, default: []].append(continuation)
        }
    }

    func updates() -> AsyncStream<QueuedOperation.Update> {
        let (stream, continuation) = AsyncStream<QueuedOperation.Update>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let key = UUID()
        observers[key] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeObserver(key) }
        }
        return stream
    }

    private func removeObserver(_ key: UUID) {
        observers[key] = nil
    }

    /// The operation `id` was merged into, followed to its end.
    private func resolve(_ id: String) -> String {
        var current = id
        var steps = 0
        while let next = forwards[current], steps < 10_000 {
            current = next
            steps += 1
        }
        return current
    }

    private func publish(_ operation: QueuedOperation, _ state: QueuedOperation.State) {
        let update = QueuedOperation.Update(operation: operation, state: state)
        for observer in observers.values { observer.yield(update) }
    }

    /// Records `id`'s final state, wakes whoever waits for it (and for the operations merged
    /// into it), and tells the observers.
    private func finish(_ id: String, _ state: QueuedOperation.State, kind: QueuedOperation.Kind?, path: String? = nil) {
        finished[id] = state
        finishedOrder.append(id)
        if finishedOrder.count > Self.rememberedStates {
            let forgotten = finishedOrder.removeFirst()
            finished[forgotten] = nil
            forwards = forwards.filter { $0.value != forgotten }
        }
        // (Waiters of operations merged into this one were moved to it when they merged.)
        for continuation in waiters.removeValue(forKey: id) ?? [] { continuation.resume(returning: state) }
        if let kind {
            publish(QueuedOperation(id: id, kind: kind, path: path, queue: self), state)
        }
    }

    // MARK: Reachability and credentials

    /// The app says the network is back: the next attempt is made now, not after its back-off.
    func networkAvailable() {
        failures = 0
        nextAttempt = nil
        fire()
        kick()
    }

    /// The app says its credentials changed (a user signed in, a token was renewed): a queue
    /// suspended by a 401 resumes.
    func credentialsChanged() {
        credentials &+= 1
        suspended = nil
        kick()
    }

    /// Stops for good (its ``PushDispatch`` ended): the attempt on the network finishes, no
    /// other starts, the file's lock is released for a new ``PushDispatch``.
    func close() {
        // The sending task is not cancelled: the attempt on the network ends by itself (its
        // deadline bounds it), and the loop stops after it. Cancelling it would cancel the
        // URLSession task under it, which FoundationNetworking on Linux can crash on
        // ("a task that is not in the registry").
        closed = true
        fire()
        lock = nil
        // Who waits for an outcome gets the state the operation is left in (pending: it stays
        // in the file for the next launch).
        for (id, continuations) in waiters {
            let state = state(of: id)
            for continuation in continuations { continuation.resume(returning: state) }
        }
        waiters = [:]
        for waiter in attemptWaiters { waiter.resume() }
        attemptWaiters = []
    }

    private func fire() {
        timer?.cancel()
        timer = nil
        wake?.resume()
        wake = nil
    }

    /// Waits `delay`, or less if ``networkAvailable()`` comes first.
    private func pause(_ delay: Duration) async {
        pauses &+= 1
        let pause = pauses
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            wake = continuation
            timer = Task { [weak self] in
                try? await Task.sleep(for: delay)
                await self?.timerFired(pause)
            }
        }
    }

    private func timerFired(_ pause: Int) {
        guard pause == pauses else { return }
        wake?.resume()
        wake = nil
        timer = nil
    }

    // MARK: Sending

    /// Starts the sending task if there is something to send and nothing stops it.
    private func kick() {
        guard task == nil, suspended == nil, !closed, !operations.isEmpty else { return }
        task = Task { await self.run() }
    }

    private func run() async {
        defer { task = nil }
        while suspended == nil, !closed, var operation = operations.first {
            // Stored as attempted before it leaves: after a crash, the queue knows the service
            // may have it.
            operation.attempts = operation.attempts < Int(Int32.max) ? operation.attempts + 1 : operation.attempts
            if operation.uid == nil { operation.uid = executor.currentUID() }
            var candidate = operations
            candidate[0] = operation
            do {
                try save(candidate)
            } catch {
                await failed(error, operation)
                continue
            }
            operations = candidate
            sending = operation.id
            let credentialsBefore = credentials
            let attempt = await executor.execute(operation)
            let result = attempt.result
            sending = nil
            bindUser(operation.id)
            if !attempt.mayHaveApplied {
                // Nothing reached the service, or it refused the token: the operation is as
                // unsent as before, can still be withdrawn, and merges with what was queued
                // while it was on the network.
                unmarkAttempt(operation.id)
                compact()
            }
            for waiter in attemptWaiters { waiter.resume() }
            attemptWaiters = []
            guard operations.first?.id == operation.id else {
                // Merged into a later operation meanwhile: the loop goes on with the queue as it is.
                continue
            }
            switch result {
            case .success(let subscription):
                settle(operation, .confirmed(subscription))
            case .failure(let error):
                switch OperationExecutor.disposition(of: error) {
                case .refuse:
                    settle(operation, .refused(error))
                case .suspend where credentials != credentialsBefore:
                    // The app renewed its credentials while this attempt was out: try again now.
                    lastError = error
                    continue
                case .suspend:
                    suspended = error
                    lastError = error
                    publish(QueuedOperation(operation, queue: self), state(of: operation.id))
                    return
                case .retry:
                    await failed(error, operation)
                }
            }
        }
        if operations.isEmpty { lastError = nil }
    }

    /// Merges the queue again from its first operation, as if each were queued now: after an
    /// attempt that never reached the service, what was queued behind it while it was on the
    /// network may cancel or repeat it.
    private func compact() {
        // Quadratic: for the queues apps keep (the limit is 256 by default), not for a file
        // of a hundred thousand.
        guard operations.count <= 1024 else { return }
        var outcome = OperationMerging.Outcome(queue: [])
        for operation in operations {
            let step = OperationMerging.enqueue(operation, into: outcome.queue, sending: sending)
            outcome.queue = step.queue
            outcome.withdrawn += step.withdrawn
            outcome.forwarded += step.forwarded
        }
        guard outcome.queue != operations else { return }
        do {
            try save(outcome.queue)
        } catch {
            lastError = error
            return
        }
        let before = operations
        operations = outcome.queue
        applyForwards(outcome.forwarded)
        for id in outcome.withdrawn {
            let withdrawn = before.first { $0.id == id }
            finish(id, .cancelled, kind: withdrawn?.kind, path: withdrawn?.path)
        }
    }

    /// Fixes the user of an operation that left without one known: the uid its attempt was
    /// made for, so that a later attempt under another user's credentials is refused.
    private func bindUser(_ id: String) {
        guard let uid = executor.currentUID(), let index = operations.firstIndex(where: { $0.id == id }), operations[index].uid == nil
        else { return }
        var candidate = operations
        candidate[index].uid = uid
        do {
            try save(candidate)
            operations = candidate
        } catch {
            // Left unbound: sent for whoever the credentials name next time.
        }
    }

    /// Takes back the attempt marked on `id` before it was sent.
    private func unmarkAttempt(_ id: String) {
        guard let index = operations.firstIndex(where: { $0.id == id }), operations[index].attempts > 0 else { return }
        var candidate = operations
        candidate[index].attempts -= 1
        do {
            try save(candidate)
            operations = candidate
        } catch {
            // Left marked: the queue only believes the service may have it.
        }
    }

    /// The operation ended: out of the queue (and of its file), its state final.
    private func settle(_ operation: PendingOperation, _ state: QueuedOperation.State) {
        failures = 0
        lastError = nil
        let candidate = operations.filter { $0.id != operation.id }
        do {
            try save(candidate)
        } catch {
            // Sent again at the next launch if the file still holds it: every operation is
            // idempotent at the service (SPEC §5's tuple id; a removal of what is gone is done).
            lastError = error
        }
        operations = candidate
        finish(operation.id, state, kind: operation.kind, path: operation.path)
    }

    /// A failure worth retrying: wait (back-off with jitter, or until the network is back).
    private func failed(_ error: PushClientError, _ operation: PendingOperation) async {
        failures = failures < Int(Int32.max) ? failures + 1 : failures
        lastError = error
        publish(QueuedOperation(operation, queue: self), state(of: operation.id))
        let delay = RetryDelay.delay(
            failures: failures, initial: configuration.initialRetryDelay, maximum: configuration.maxRetryDelay, random: Double.random(in: 0..<1))
        nextAttempt = Date().addingTimeInterval(RetryDelay.seconds(delay))
        await pause(delay)
        nextAttempt = nil
    }

    /// 16 random lowercase hexadecimal digits.
    static func newID() -> String {
        let value = UInt64.random(in: .min ... .max)
        let text = String(value, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}

extension QueuedOperation {
    init(id: String, kind: Kind, path: String?, queue: OperationQueueActor) {
        self.id = id
        self.kind = kind
        self.path = path
        self.queue = queue
    }
}
