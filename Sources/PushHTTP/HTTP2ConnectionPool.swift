import NIOCore
import PushCore
import Synchronization

/// The HTTP/2 connections of a transport, to every origin: carries out what its
/// ``HTTP2PoolStateMachine`` decides (connects, closes), and sweeps idle connections away on a
/// timer of its own.
final class HTTP2ConnectionPool: Sendable {
    typealias Machine = HTTP2PoolStateMachine<HTTP2Connection, EventLoopFuture<HTTP2Connection>>

    let settings: HTTP2ConnectionSettings
    let machine: Mutex<Machine>
    let metrics: any MetricsRecorder
    /// The sweep of idle connections (every quarter of the idle time, at least every 10 s).
    let sweeper: Mutex<RepeatedTask?>
    /// Connections closed by the pool, by reason (tests and `/status`).
    let closedIdle = Atomic<Int>(0)
    let evicted = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
    /// What the gauges last said (origins held, connections open), to move them by the change.
    let published = Mutex<(origins: Int, connections: Int)>((0, 0))

    init(settings: HTTP2ConnectionSettings, configuration: Machine.Configuration, metrics: any MetricsRecorder) {
        self.settings = settings
        self.machine = Mutex(Machine(configuration: configuration))
        self.metrics = metrics
        self.sweeper = Mutex(nil)
        let period = max(TimeAmount.milliseconds(10), min(.seconds(10), .nanoseconds(configuration.idleTimeout.nanoseconds / 4)))
        // Weak: a transport dropped without `shutdown()` takes its sweep with it.
        let task = settings.group.next().scheduleRepeatedTask(initialDelay: period, delay: period) { [weak self] task in
            guard let self else {
                task.cancel()
                return
            }
            self.sweep(now: .now())
        }
        sweeper.withLock { $0 = task }
    }

    /// A connection to `target`'s origin: one open now, or one being made (or refused),
    /// completed on an event loop.
    enum Lease {
        case ready(HTTP2Connection)
        case later(EventLoopFuture<HTTP2Connection>)
    }

    /// A connection to `target`'s origin, made if need be: at once when one is open (no future
    /// to allocate and complete for each request).
    func lease(to target: RequestTarget) -> Lease {
        let settings = self.settings
        let lease = machine.withLock { machine in
            machine.lease(target.origin, now: .now()) { _, _ in HTTP2Connection.connect(to: target, settings: settings) }
        }
        close(lease.close, reason: .evicted)
        switch lease.choice {
        case .use(let connection):
            return .ready(connection)
        case .wait(let future):
            return .later(future)
        case .connecting(let future, let slot, let id):
            future.whenComplete { result in
                let connection = try? result.get()
                let orphan = self.machine.withLock { $0.connected(target.origin, slot: slot, id: id, connection) }
                orphan?.close()
                self.publishHeld()
            }
            return .later(future)
        case .refuse(let error):
            if error.kind == .tooManyOrigins {
                refused.add(1, ordering: .relaxed)
                metrics.increment("pushdispatch_http_origins_refused_total")
            }
            return .later(settings.group.next().makeFailedFuture(error))
        }
    }

    /// A connection to `target`'s origin, made if need be; completed on an event loop.
    func connection(to target: RequestTarget) -> EventLoopFuture<HTTP2Connection> {
        switch lease(to: target) {
        case .ready(let connection): connection.channel.eventLoop.makeSucceededFuture(connection)
        case .later(let future): future
        }
    }

    /// Closes what the machine says is idle or drained at `now`.
    func sweep(now: NIODeadline) {
        let closing = machine.withLock { $0.sweep(now: now) }
        close(closing.idle, reason: .idle)
        close(closing.drained, reason: .drained)
        publishHeld()
    }

    /// Why the pool closed connections (the metric's `reason` label).
    enum CloseReason: String {
        /// No request to their origin for the idle time, no stream open.
        case idle
        /// Their origin made room for another (least recently used first).
        case evicted
        /// They stopped taking streams (GOAWAY, ids spent) and their last stream ended.
        case drained
    }

    private func close(_ connections: [HTTP2Connection], reason: CloseReason) {
        guard !connections.isEmpty else { return }
        for connection in connections { connection.close() }
        switch reason {
        case .idle: closedIdle.add(connections.count, ordering: .relaxed)
        case .evicted: evicted.add(connections.count, ordering: .relaxed)
        case .drained: break
        }
        metrics.increment("pushdispatch_http_connections_closed_total", [("reason", reason.rawValue)], by: connections.count)
        publishHeld()
    }

    /// Moves the gauges `pushdispatch_http_origins_held` and `pushdispatch_http_connections_open`
    /// to what the pool holds now. Called where the counts change (a connection made, closed,
    /// swept), not per request: counting walks every origin.
    private func publishHeld() {
        let change = published.withLock { published in
            let now = held
            defer { published = now }
            return (origins: now.origins - published.origins, connections: now.connections - published.connections)
        }
        if change.origins != 0 { metrics.adjust("pushdispatch_http_origins_held", [], by: change.origins) }
        if change.connections != 0 { metrics.adjust("pushdispatch_http_connections_open", [], by: change.connections) }
    }

    /// Origins and connections held now.
    var held: (origins: Int, connections: Int) {
        machine.withLock { ($0.origins.count, $0.connectionCount) }
    }

    /// Closes every connection (requests in flight fail) and stops the sweep.
    func shutdown() async {
        let task = sweeper.withLock { task in
            defer { task = nil }
            return task
        }
        task?.cancel()
        let connections = machine.withLock { $0.shutdown() }
        for connection in connections { try? await connection.channel.close() }
        publishHeld()
    }
}
