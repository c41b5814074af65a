import NIOCore

/// What the pool needs of a connection: how many streams it has open, whether it takes new
/// ones, and a way to close it.
protocol PooledConnection: AnyObject {
    /// Streams open (requests in flight).
    var load: Int { get }
    /// Whether it takes new streams (no GOAWAY, ids left, the channel open).
    var usable: Bool { get }
    /// Closes it (streams still open fail as lost).
    func close()
}

/// The connections of every origin a transport talks to, as a value: which origin has which
/// connections (``Configuration/connectionsPerOrigin`` slots each), which one a request takes,
/// when one is made, and which are closed — idle ones after ``Configuration/idleTimeout``, the
/// least recently used origin when ``Configuration/maximumOrigins`` are held, the ones that
/// stopped taking streams once their last stream ends. It decides; ``HTTP2ConnectionPool``
/// connects and closes, so every rule here is tested without a socket.
///
/// `Pending` is a connection being made (a future in the pool, a number in the tests).
struct HTTP2PoolStateMachine<Connection: PooledConnection, Pending> {
    struct Configuration: Sendable {
        var connectionsPerOrigin: Int
        var maximumOrigins: Int
        var idleTimeout: TimeAmount
    }

    enum Slot {
        case empty
        case connecting(Pending, id: UInt64)
        case ready(Connection)
    }

    struct OriginState {
        var slots: [Slot]
        /// When a request last asked for a connection to this origin.
        var lastUsed: NIODeadline

        var isEmpty: Bool { slots.allSatisfy { if case .empty = $0 { true } else { false } } }

        /// No connection being made, no stream open: closing its connections loses nothing.
        var isIdle: Bool {
            slots.allSatisfy { slot in
                switch slot {
                case .empty: true
                case .connecting: false
                case .ready(let connection): connection.load == 0
                }
            }
        }
    }

    /// What a request gets.
    enum Choice {
        /// A connection with a stream free.
        case use(Connection)
        /// A connection being made: wait for it.
        case wait(Pending)
        /// A new connection, being made in `slot` (``connected(_:slot:id:_:)`` says how it went).
        case connecting(Pending, slot: Int, id: UInt64)
        /// No connection: every origin the pool may hold is busy, or it is shut down.
        case refuse(HTTP2ConnectionError)
    }

    /// A choice, and the connections to close now (an origin evicted to make room, a connection
    /// that stopped taking streams with none left open).
    struct Lease {
        var choice: Choice
        var close: [Connection]
    }

    /// Why connections were closed, for the metrics.
    struct Closing {
        var idle: [Connection] = []
        var evicted: [Connection] = []
        var drained: [Connection] = []

        var all: [Connection] { idle + evicted + drained }
    }

    let configuration: Configuration
    private(set) var origins: [RequestTarget.Origin: OriginState] = [:]
    /// Connections that stopped taking streams (GOAWAY, ids spent) while streams were open:
    /// closed when the last one ends.
    private(set) var draining: [Connection] = []
    private(set) var isShutDown = false
    private var nextID: UInt64 = 0

    init(configuration: Configuration) {
        self.configuration = Configuration(
            connectionsPerOrigin: max(1, configuration.connectionsPerOrigin), maximumOrigins: max(1, configuration.maximumOrigins),
            idleTimeout: configuration.idleTimeout)
    }

    /// Connections held: open, being made, or draining.
    var connectionCount: Int {
        draining.count
            + origins.values.reduce(0) { sum, origin in
                sum + origin.slots.reduce(0) { if case .empty = $1 { $0 } else { $0 + 1 } }
            }
    }

    /// A connection for a request to `origin` at `now`: the usable one with the fewest streams
    /// open; a new one in an empty slot while some slot is empty and every connection is busy
    /// (so that a burst spreads over every connection). `connect` starts making a connection
    /// (it must not call back into the pool).
    mutating func lease(_ origin: RequestTarget.Origin, now: NIODeadline, connect: (_ slot: Int, _ id: UInt64) -> Pending) -> Lease {
        guard !isShutDown else { return Lease(choice: .refuse(HTTP2ConnectionError(kind: .shutDown, description: "the transport is shut down")), close: []) }
        var close: [Connection] = []
        var state: OriginState
        if let known = origins[origin] {
            state = known
        } else {
            if origins.count >= configuration.maximumOrigins {
                guard let evicted = leastRecentlyUsedIdleOrigin() else {
                    return Lease(
                        choice: .refuse(
                            HTTP2ConnectionError(
                                kind: .tooManyOrigins,
                                description: "HTTP/2: \(origins.count) origins are in use (delivery.maximumOrigins); \(origin.host.prefix(100)):\(origin.port) waits")),
                        close: [])
                }
                close += readyConnections(origins.removeValue(forKey: evicted))
            }
            state = OriginState(slots: Array(repeating: .empty, count: configuration.connectionsPerOrigin), lastUsed: now)
        }
        state.lastUsed = now
        var best: (index: Int, connection: Connection, load: Int)?
        var emptySlot: Int?
        var pending: Pending?
        for index in state.slots.indices {
            switch state.slots[index] {
            case .ready(let connection) where connection.usable:
                let load = connection.load
                if best.map({ load < $0.load }) ?? true { best = (index, connection, load) }
            case .ready(let connection):
                state.slots[index] = .empty
                if connection.load == 0 { close.append(connection) } else { draining.append(connection) }
                if emptySlot == nil { emptySlot = index }
            case .empty:
                if emptySlot == nil { emptySlot = index }
            case .connecting(let future, _):
                if pending == nil { pending = future }
            }
        }
        let choice: Choice
        if let emptySlot, best.map({ $0.load > 0 }) ?? true {
            nextID &+= 1
            let future = connect(emptySlot, nextID)
            state.slots[emptySlot] = .connecting(future, id: nextID)
            choice = .connecting(future, slot: emptySlot, id: nextID)
        } else if let best {
            choice = .use(best.connection)
        } else if let pending {
            choice = .wait(pending)
        } else {
            choice = .refuse(HTTP2ConnectionError(kind: .connect, description: "HTTP/2: no connection slot"))  // no slot at all: not reached
        }
        origins[origin] = state
        return Lease(choice: choice, close: close)
    }

    /// The connection made in `slot` of `origin` (as ``Choice/connecting(_:slot:id:)``
    /// numbered it) is ready, or failed. A connection the pool no longer waits for (its origin
    /// evicted, the pool shut down) is returned: close it.
    mutating func connected(_ origin: RequestTarget.Origin, slot: Int, id: UInt64, _ connection: Connection?) -> Connection? {
        guard var state = origins[origin], slot < state.slots.count, case .connecting(_, let waited) = state.slots[slot], waited == id else {
            return connection
        }
        state.slots[slot] = connection.map { .ready($0) } ?? .empty
        origins[origin] = state
        return nil
    }

    /// What to close at `now`: connections without a stream open whose origin had no request
    /// for ``Configuration/idleTimeout``, and draining ones whose last stream ended. Origins
    /// left without a connection after that time are forgotten.
    mutating func sweep(now: NIODeadline) -> Closing {
        var closing = Closing()
        for (origin, var state) in origins {
            let idle = now - state.lastUsed >= configuration.idleTimeout
            var changed = false
            for index in state.slots.indices {
                guard case .ready(let connection) = state.slots[index] else { continue }
                if !connection.usable {
                    state.slots[index] = .empty
                    changed = true
                    if connection.load == 0 { closing.drained.append(connection) } else { draining.append(connection) }
                } else if idle, connection.load == 0 {
                    state.slots[index] = .empty
                    changed = true
                    closing.idle.append(connection)
                }
            }
            if idle, state.isEmpty {
                origins[origin] = nil
            } else if changed {
                origins[origin] = state
            }
        }
        var stillDraining: [Connection] = []
        for connection in draining {
            if connection.load == 0 { closing.drained.append(connection) } else { stillDraining.append(connection) }
        }
        draining = stillDraining
        return closing
    }

    /// Shuts the pool: every connection to close; no new one.
    mutating func shutdown() -> [Connection] {
        isShutDown = true
        var all = draining
        for state in origins.values { all += readyConnections(state) }
        origins.removeAll()
        draining.removeAll()
        return all
    }

    /// The origin used least recently among those whose connections carry no stream and none
    /// is being made.
    private func leastRecentlyUsedIdleOrigin() -> RequestTarget.Origin? {
        var oldest: (origin: RequestTarget.Origin, at: NIODeadline)?
        for (origin, state) in origins where state.isIdle {
            if oldest.map({ state.lastUsed < $0.at }) ?? true { oldest = (origin, state.lastUsed) }
        }
        return oldest?.origin
    }

    private func readyConnections(_ state: OriginState?) -> [Connection] {
        state?.slots.compactMap { if case .ready(let connection) = $0 { connection } else { nil } } ?? []
    }
}
