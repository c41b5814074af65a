import NIOCore
import NIOHPACK
import NIOHTTP2
@testable import PushHTTP
import Testing

/// The streams of one connection, without a socket: events in, actions out.
@Suite("HTTP/2 streams: what each frame means for the requests waiting")
struct HTTP2StreamStateMachineTests {
    typealias Machine = HTTP2StreamStateMachine<Int>

    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func at(_ milliseconds: Int64) -> NIODeadline { t0 + .milliseconds(milliseconds) }

    static func headers(_ status: String?, retryAfter: String? = nil) -> HPACKHeaders {
        var headers = HPACKHeaders()
        if let status { headers.add(name: ":status", value: status) }
        if let retryAfter { headers.add(name: "retry-after", value: retryAfter) }
        return headers
    }

    /// Opens `count` streams for waiters 1…count with deadlines 100 ms apart; their ids.
    static func opened(_ machine: inout Machine, _ count: Int) -> [HTTP2StreamID] {
        (1...count).compactMap { waiter in
            if case .open(let id, _) = machine.open(waiter, deadline: at(Int64(waiter) * 100), active: true) { id } else { nil }
        }
    }

    static func succeeded(_ completion: Machine.Completion) -> (Int, ProviderAnswer)? {
        if case .succeed(let waiter, let answer) = completion { (waiter, answer) } else { nil }
    }

    static func failed(_ completion: Machine.Completion) -> (Int, HTTP2ConnectionError)? {
        switch completion {
        case .fail(let waiter, let error): (waiter, error)
        case .failAndReset(let waiter, let error, _, _): (waiter, error)
        default: nil
        }
    }

    @Test("streams take odd ids in order; the timer is armed only for an earlier deadline")
    func idsAndTimer() {
        var machine = Machine()
        var armed: [NIODeadline?] = []
        var ids: [HTTP2StreamID] = []
        for (waiter, deadline) in [(1, 500), (2, 700), (3, 200), (4, 200)] as [(Int, Int64)] {
            guard case .open(let id, let armAt) = machine.open(waiter, deadline: Self.at(deadline), active: true) else {
                Issue.record("stream \(waiter) refused")
                return
            }
            ids.append(id)
            armed.append(armAt)
        }
        #expect(ids == [1, 3, 5, 7].map { HTTP2StreamID($0) })
        #expect(armed == [Self.at(500), nil, Self.at(200), nil])
        #expect(machine.count == 4)
    }

    @Test("an answer completes its stream: status, Retry-After and body; a status without end of stream waits for the body")
    func answers() throws {
        var machine = Machine()
        let ids = Self.opened(&machine, 3)
        #expect(Self.succeeded(machine.headers(ids[0], Self.headers("200"), endStream: true))?.1.status == 200)
        #expect(machine.headers(ids[1], Self.headers("429", retryAfter: "30"), endStream: false).isNone)
        #expect(machine.data(ids[1], ByteBuffer(string: "{\"er"), endStream: false).isNone)
        let (waiter, answer) = try #require(Self.succeeded(machine.data(ids[1], ByteBuffer(string: "ror\":1}"), endStream: true)))
        #expect(waiter == 2)
        #expect(answer.status == 429)
        #expect(answer.retryAfter == "30")
        #expect(String(decoding: answer.body, as: UTF8.self) == "{\"error\":1}")
        // Informational answers are skipped; the final one follows.
        #expect(machine.headers(ids[2], Self.headers("100"), endStream: false).isNone)
        #expect(Self.succeeded(machine.headers(ids[2], Self.headers("204"), endStream: true))?.1.status == 204)
        #expect(machine.count == 0)
    }

    @Test(
        "answers that break the protocol fail their stream, as lost",
        arguments: [
            (nil, false, true), ("abc", false, true), ("99", false, true), ("600", false, true), ("+20", false, true), ("2000", false, true),
            ("103", true, false),
        ] as [(String?, Bool, Bool)])
    func brokenAnswers(status: String?, endStream: Bool, reset: Bool) throws {
        var machine = Machine()
        let id = try #require(Self.opened(&machine, 1).first)
        let completion = machine.headers(id, Self.headers(status), endStream: endStream)
        let (waiter, error) = try #require(Self.failed(completion), "\(completion)")
        #expect(waiter == 1)
        #expect(error.kind == .lost)
        if case .failAndReset(_, _, let resetID, let code) = completion {
            #expect(reset && resetID == id && code == .protocolError)
        } else {
            #expect(!reset)
        }
        #expect(machine.count == 0)
    }

    @Test("a malformed header block (RFC 9113 §8.2), answer or trailers, resets its stream: the request is lost, the fault named, no value")
    func malformedBlocks() throws {
        var machine = Machine()
        let ids = Self.opened(&machine, 2)
        var bad = Self.headers("200")
        bad.add(name: "x-token", value: "secret\r\nset-cookie: a")
        let completion = machine.headers(ids[0], bad, endStream: true)
        guard case .failAndReset(let waiter, let error, let id, let code) = completion else {
            Issue.record("\(completion)")
            return
        }
        #expect(waiter == 1 && id == ids[0] && code == .protocolError)
        #expect(error.kind == .lost)
        #expect(error.description == "HTTP/2: a malformed answer: the field x-token holds NUL, CR or LF")
        // Trailers after a valid answer: no pseudo-header field.
        #expect(machine.headers(ids[1], Self.headers("200"), endStream: false).isNone)
        let trailers = machine.headers(ids[1], Self.headers("200"), endStream: true)
        #expect(Self.failed(trailers)?.1.description == "HTTP/2: a malformed answer: a pseudo-header field in trailers")
        #expect(machine.count == 0)
    }

    @Test("a body past the bound is cut")
    func boundedBody() throws {
        var machine = Machine(maximumAnswerBytes: 10)
        let id = try #require(Self.opened(&machine, 1).first)
        _ = machine.headers(id, Self.headers("200"), endStream: false)
        _ = machine.data(id, ByteBuffer(string: "0123456"), endStream: false)
        _ = machine.data(id, ByteBuffer(string: "789abcdef"), endStream: false)
        let answer = try #require(Self.succeeded(machine.data(id, ByteBuffer(string: "ghi"), endStream: true)))
        #expect(String(decoding: answer.1.body, as: UTF8.self) == "0123456789")
    }

    @Test("GOAWAY: no new stream; those above the last processed fail as never processed, the others go on")
    func goAway() throws {
        var machine = Machine()
        let ids = Self.opened(&machine, 4)
        let failed = machine.goAway(lastStreamID: ids[1])
        #expect(failed == [3, 4])
        #expect(!machine.acceptsStreams)
        guard case .refuse(5, let error) = machine.open(5, deadline: Self.at(900), active: true) else {
            Issue.record("a stream opened after GOAWAY")
            return
        }
        #expect(error.kind == .lost && error.unprocessed)
        #expect(Self.succeeded(machine.headers(ids[0], Self.headers("200"), endStream: true))?.0 == 1)
        #expect(machine.count == 1)
    }

    @Test(
        "a reset fails its stream: never processed only with REFUSED_STREAM",
        arguments: [(HTTP2ErrorCode.refusedStream, true), (.cancel, false), (.internalError, false), (.noError, false)])
    func resets(code: HTTP2ErrorCode, unprocessed: Bool) throws {
        var machine = Machine()
        let id = try #require(Self.opened(&machine, 1).first)
        let (waiter, error) = try #require(Self.failed(machine.reset(id, code: code)))
        #expect(waiter == 1)
        #expect(error.kind == .lost && error.unprocessed == unprocessed)
        #expect(machine.reset(id, code: code).isNone, "a second reset of the same stream")
    }

    @Test("a stream closed cleanly after its status completes it; closed otherwise, it is lost")
    func closes() throws {
        var machine = Machine()
        let ids = Self.opened(&machine, 3)
        _ = machine.headers(ids[0], Self.headers("200"), endStream: false)
        #expect(Self.succeeded(machine.closed(ids[0], reason: nil))?.1.status == 200)
        #expect(Self.failed(machine.closed(ids[1], reason: nil))?.1.kind == .lost)
        _ = machine.headers(ids[2], Self.headers("200"), endStream: false)
        #expect(Self.failed(machine.closed(ids[2], reason: .cancel))?.1.kind == .lost)
        #expect(machine.count == 0)
    }

    @Test("the timer fails the streams past their deadline, in id order, and says when to look next")
    func deadlines() {
        var machine = Machine()
        _ = Self.opened(&machine, 4)  // deadlines 100, 200, 300, 400 ms
        let first = machine.expire(now: Self.at(250))
        #expect(first.expired.map { $0.1 } == [1, 2])
        #expect(first.expired.map { $0.0 } == [1, 3].map { HTTP2StreamID($0) })
        #expect(first.next == Self.at(300))
        #expect(machine.timerAt == Self.at(300))
        let second = machine.expire(now: Self.at(1_000))
        #expect(second.expired.map { $0.1 } == [3, 4])
        #expect(second.next == nil)
        #expect(machine.count == 0)
    }

    @Test("the connection window is given back by halves, counting every DATA frame")
    func window() {
        var machine = Machine()
        let half = Machine.connectionWindow / 2
        #expect(machine.received(bytes: half - 1) == nil)
        #expect(machine.received(bytes: 1) == half)
        #expect(machine.unacknowledged == 0)
        #expect(machine.received(bytes: Int.max) == Int(Int32.max), "saturated, never a trap")
        #expect(machine.received(bytes: -5) == nil)
    }

    @Test("stream ids run out: no new stream, the connection is replaced")
    func idsRunOut() {
        var machine = Machine(firstStreamID: Machine.lastStreamID - 2)
        guard case .open = machine.open(1, deadline: Self.at(100), active: true) else {
            Issue.record("the last id was refused")
            return
        }
        guard case .refuse(2, let error) = machine.open(2, deadline: Self.at(100), active: true) else {
            Issue.record("an id past the last was given")
            return
        }
        #expect(error.unprocessed)
        #expect(!machine.acceptsStreams)
    }

    @Test("a closed connection fails every stream and takes no new one")
    func closeAll() {
        var machine = Machine()
        _ = Self.opened(&machine, 3)
        #expect(machine.closeAll() == [1, 2, 3])
        guard case .refuse = machine.open(4, deadline: Self.at(100), active: true) else {
            Issue.record("a stream opened on a closed connection")
            return
        }
        var inactive = Machine()
        guard case .refuse = inactive.open(1, deadline: Self.at(100), active: false) else {
            Issue.record("a stream opened on an inactive channel")
            return
        }
    }

    @Test("frames for streams nobody waits for change nothing")
    func unknownStreams() {
        var machine = Machine()
        let stranger = HTTP2StreamID(99)
        #expect(machine.headers(stranger, Self.headers("200"), endStream: true).isNone)
        #expect(machine.data(stranger, ByteBuffer(string: "x"), endStream: true).isNone)
        #expect(machine.reset(stranger, code: .cancel).isNone)
        #expect(machine.closed(stranger, reason: nil).isNone)
        #expect(machine.streamError(stranger, "x").isNone)
    }
}

extension HTTP2StreamStateMachine.Completion {
    var isNone: Bool { if case .none = self { true } else { false } }
}
