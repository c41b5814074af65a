import NIOCore
@testable import PushHTTP
import Testing

/// The pool of connections, without a socket: requests and time in, choices and closes out.
@Suite("HTTP/2 connection pool: which connection, when to connect, when to close")
struct HTTP2PoolStateMachineTests {
    /// A connection the test sets the load and state of.
    final class Connection: PooledConnection, CustomStringConvertible {
        let name: String
        var load = 0
        var usable = true
        var closed = false

        init(_ name: String) { self.name = name }
        func close() { closed = true }
        var description: String { name }
    }

    typealias Machine = HTTP2PoolStateMachine<Connection, Int>

    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static func at(_ seconds: Int64) -> NIODeadline { t0 + .seconds(seconds) }
    static func origin(_ port: Int, host: String = "push.example") -> RequestTarget.Origin { RequestTarget.Origin(host: host, port: port) }

    static func machine(perOrigin: Int = 2, origins: Int = 8, idle: Int64 = 60) -> Machine {
        Machine(configuration: .init(connectionsPerOrigin: perOrigin, maximumOrigins: origins, idleTimeout: .seconds(idle)))
    }

    /// Leases a connection to `origin`; a new one is made at once (named after its origin and
    /// slot) and returned as ready.
    @discardableResult
    static func use(_ machine: inout Machine, _ origin: RequestTarget.Origin, at now: NIODeadline) -> (Connection?, [Connection]) {
        var made = 0
        let lease = machine.lease(origin, now: now) { _, _ in
            made += 1
            return made
        }
        switch lease.choice {
        case .use(let connection):
            return (connection, lease.close)
        case .connecting(_, let slot, let id):
            let connection = Connection("\(origin.port)/\(slot)")
            #expect(machine.connected(origin, slot: slot, id: id, connection) == nil)
            return (connection, lease.close)
        case .wait, .refuse:
            return (nil, lease.close)
        }
    }

    @Test("a burst spreads over every slot, then takes the connection with the fewest streams")
    func spreading() throws {
        var machine = Self.machine(perOrigin: 3)
        let origin = Self.origin(443)
        let first = try #require(Self.use(&machine, origin, at: Self.at(0)).0)
        first.load = 1
        let second = try #require(Self.use(&machine, origin, at: Self.at(0)).0)
        second.load = 1
        let third = try #require(Self.use(&machine, origin, at: Self.at(0)).0)
        #expect(Set([first.name, second.name, third.name]).count == 3)
        third.load = 5
        second.load = 0
        #expect(Self.use(&machine, origin, at: Self.at(0)).0 === second)
        #expect(machine.connectionCount == 3)
    }

    @Test("an idle connection is reused rather than a new one made")
    func reuse() throws {
        var machine = Self.machine(perOrigin: 4)
        let origin = Self.origin(443)
        let first = try #require(Self.use(&machine, origin, at: Self.at(0)).0)
        for second in 1...10 { #expect(Self.use(&machine, origin, at: Self.at(Int64(second))).0 === first) }
        #expect(machine.connectionCount == 1)
    }

    @Test("requests while a connection is being made wait for it when no slot is free")
    func waiting() {
        var machine = Self.machine(perOrigin: 1)
        let origin = Self.origin(443)
        let first = machine.lease(origin, now: Self.at(0)) { _, _ in 7 }
        guard case .connecting(7, 0, _) = first.choice else {
            Issue.record("\(first.choice)")
            return
        }
        let second = machine.lease(origin, now: Self.at(0)) { _, _ in 8 }
        guard case .wait(7) = second.choice else {
            Issue.record("\(second.choice)")
            return
        }
    }

    @Test("a failed connection frees its slot; a late answer for a slot given up is closed")
    func failures() throws {
        var machine = Self.machine(perOrigin: 1, origins: 1)
        let origin = Self.origin(443)
        guard case .connecting(_, let slot, let id) = machine.lease(origin, now: Self.at(0), connect: { _, _ in 1 }).choice else {
            Issue.record("no connection made")
            return
        }
        #expect(machine.connected(origin, slot: slot, id: id, nil) == nil)
        guard case .connecting(_, let slot2, let id2) = machine.lease(origin, now: Self.at(1), connect: { _, _ in 2 }).choice else {
            Issue.record("the failed slot was not made again")
            return
        }
        #expect(id2 != id)
        // The same slot answered twice (a stale id): the stale connection is to be closed.
        let stale = Connection("stale")
        #expect(machine.connected(origin, slot: slot2, id: id, stale) === stale)
        let shut = machine.shutdown()
        #expect(shut.isEmpty)
        let late = Connection("late")
        #expect(machine.connected(origin, slot: slot2, id: id2, late) === late, "connected after the shutdown: closed")
        guard case .refuse(let error) = machine.lease(origin, now: Self.at(2), connect: { _, _ in 3 }).choice else {
            Issue.record("a connection after shutdown")
            return
        }
        #expect(error.kind == .shutDown)
    }

    @Test("40 origins used once: every connection closed after the idle time, and the origins forgotten")
    func idleOrigins() {
        var machine = Self.machine(perOrigin: 4, origins: 1_024, idle: 60)
        var connections: [Connection] = []
        for port in 1...40 {
            if let connection = Self.use(&machine, Self.origin(port), at: Self.at(0)).0 { connections.append(connection) }
        }
        #expect(connections.count == 40)
        #expect(machine.connectionCount == 40)
        #expect(machine.sweep(now: Self.at(59)).all.isEmpty, "closed before the idle time")
        let closing = machine.sweep(now: Self.at(60))
        #expect(closing.idle.count == 40)
        #expect(machine.origins.isEmpty)
        #expect(machine.connectionCount == 0)
    }

    @Test("idle time counts from the last request to the origin; a stream open keeps its connection")
    func idleRules() throws {
        var machine = Self.machine(perOrigin: 2, idle: 60)
        let busy = try #require(Self.use(&machine, Self.origin(1), at: Self.at(0)).0)
        busy.load = 1
        let recent = try #require(Self.use(&machine, Self.origin(2), at: Self.at(0)).0)
        Self.use(&machine, Self.origin(2), at: Self.at(30))
        let closing = machine.sweep(now: Self.at(61))
        #expect(closing.all.isEmpty)
        #expect(!recent.closed)
        busy.load = 0
        let later = machine.sweep(now: Self.at(91))
        #expect(Set(later.idle.map(\.name)) == Set([busy.name, recent.name]))
    }

    @Test("a connection that stops taking streams is replaced; closed when its last stream ends")
    func draining() throws {
        var machine = Self.machine(perOrigin: 1)
        let origin = Self.origin(443)
        let old = try #require(Self.use(&machine, origin, at: Self.at(0)).0)
        old.load = 2
        old.usable = false  // GOAWAY
        let (new, closed) = Self.use(&machine, origin, at: Self.at(1))
        #expect(new !== old && new != nil)
        #expect(closed.isEmpty, "streams still open on the old one")
        #expect(machine.draining.count == 1)
        #expect(machine.sweep(now: Self.at(2)).drained.isEmpty)
        old.load = 0
        #expect(machine.sweep(now: Self.at(3)).drained.map(\.name) == [old.name])
        #expect(machine.draining.isEmpty)
    }

    @Test("the bound on origins holds under 1,000 distinct origins: the least recently used idle one makes room")
    func boundedOrigins() {
        var machine = Self.machine(perOrigin: 4, origins: 16)
        var evicted: [Connection] = []
        var made: [String: Connection] = [:]
        for port in 1...1_000 {
            let (connection, closed) = Self.use(&machine, Self.origin(port), at: Self.at(Int64(port)))
            if let connection { made[connection.name] = connection }
            evicted += closed
            #expect(machine.origins.count <= 16)
            #expect(machine.connectionCount <= 16 * 4)
        }
        #expect(made.count == 1_000)
        #expect(evicted.count == 1_000 - 16)
        // Least recently used first: the survivors are the last 16.
        #expect(Set(machine.origins.keys.map(\.port)) == Set(985...1_000))
        #expect(Set(evicted.map(\.name)) == Set((1...984).map { "\($0)/0" }))
    }

    @Test("when every origin held is busy, a new one is refused (retried later) and nothing in flight is cut")
    func busyOrigins() throws {
        var machine = Self.machine(perOrigin: 1, origins: 2)
        let a = try #require(Self.use(&machine, Self.origin(1), at: Self.at(0)).0)
        let b = try #require(Self.use(&machine, Self.origin(2), at: Self.at(1)).0)
        a.load = 1
        b.load = 1
        let lease = machine.lease(Self.origin(3), now: Self.at(2)) { _, _ in 1 }
        guard case .refuse(let error) = lease.choice else {
            Issue.record("\(lease.choice)")
            return
        }
        #expect(error.kind == .tooManyOrigins)
        #expect(error.transportError.kind == .tooManyOrigins)
        #expect(lease.close.isEmpty)
        b.load = 0
        let (c, closed) = Self.use(&machine, Self.origin(3), at: Self.at(3))
        #expect(c != nil)
        #expect(closed.map(\.name) == [b.name], "the idle one made room, not the busy one")
    }

    @Test("an origin whose connection is still being made is not evicted")
    func connectingNotEvicted() {
        var machine = Self.machine(perOrigin: 1, origins: 1)
        _ = machine.lease(Self.origin(1), now: Self.at(0)) { _, _ in 1 }
        guard case .refuse = machine.lease(Self.origin(2), now: Self.at(1), connect: { _, _ in 2 }).choice else {
            Issue.record("evicted an origin that was connecting")
            return
        }
    }

    @Test("origins whose connections failed are forgotten after the idle time too")
    func failedOriginsForgotten() {
        var machine = Self.machine(perOrigin: 2, origins: 1_024, idle: 10)
        for port in 1...500 {
            guard case .connecting(_, let slot, let id) = machine.lease(Self.origin(port), now: Self.at(0), connect: { _, _ in port }).choice else { continue }
            _ = machine.connected(Self.origin(port), slot: slot, id: id, nil)
        }
        #expect(machine.origins.count == 500)
        #expect(machine.connectionCount == 0)
        _ = machine.sweep(now: Self.at(10))
        #expect(machine.origins.isEmpty)
    }

    @Test("shutdown closes every connection, draining ones included")
    func shutdown() throws {
        var machine = Self.machine(perOrigin: 1)
        let a = try #require(Self.use(&machine, Self.origin(1), at: Self.at(0)).0)
        a.load = 1
        a.usable = false
        let b = try #require(Self.use(&machine, Self.origin(1), at: Self.at(1)).0)
        let c = try #require(Self.use(&machine, Self.origin(2), at: Self.at(1)).0)
        #expect(Set(machine.shutdown().map(\.name)) == Set([a.name, b.name, c.name]))
        #expect(machine.connectionCount == 0)
    }
}
