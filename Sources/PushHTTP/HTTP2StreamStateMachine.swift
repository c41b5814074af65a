import NIOCore
import NIOHPACK
import NIOHTTP2

/// The streams of one HTTP/2 connection as a value: which are open and who waits for each,
/// their deadlines, the answers being read, GOAWAY, resets, the connection window. It decides;
/// ``HTTP2ClientHandler`` writes the frames and calls the waiters it is told to, so every
/// rule here is tested without a socket (feed events, check the actions).
///
/// `Waiter` is whoever waits for a stream's answer: an ``AnswerWaiter`` in the handler, a
/// number in the tests.
struct HTTP2StreamStateMachine<Waiter> {
    struct Exchange {
        var waiter: Waiter
        var deadline: NIODeadline
        var status: Int?
        var retryAfter: String?
        var body: ByteBuffer?
    }

    /// What an event means for one stream.
    enum Completion {
        case none
        case succeed(Waiter, ProviderAnswer)
        case fail(Waiter, HTTP2ConnectionError)
        /// Fail the waiter and reset the stream with `code` (an answer that breaks the protocol).
        case failAndReset(Waiter, HTTP2ConnectionError, HTTP2StreamID, HTTP2ErrorCode)
    }

    /// What opening a stream came to.
    enum Opening {
        /// Write the request on `id`; arm the deadline timer for `armAt` (nil: armed early enough).
        case open(HTTP2StreamID, armAt: NIODeadline?)
        /// Not opened: the waiter fails with the error (the connection takes no new stream).
        case refuse(Waiter, HTTP2ConnectionError)
    }

    private(set) var exchanges: [HTTP2StreamID: Exchange] = [:]
    /// The next stream id this client opens (odd, increasing; RFC 9113 §5.1.1).
    private(set) var nextStreamID: Int32
    /// GOAWAY came, the ids ran out or the connection closed: no new stream.
    private(set) var acceptsStreams = true
    /// When the deadline timer is armed for (one timer per connection, at the earliest deadline
    /// of its streams: scheduling and cancelling one per request cost more than its frames).
    private(set) var timerAt: NIODeadline?
    /// Bytes of DATA read since the last connection-level WINDOW_UPDATE (frame by frame, no
    /// multiplexer gives the window back): given back by halves of ``connectionWindow``.
    private(set) var unacknowledged = 0
    /// Answers longer than this are cut.
    let maximumAnswerBytes: Int
    /// The connection's receive window this client announces (1 MiB).
    static var connectionWindow: Int { 1 << 20 }
    /// The last stream id a client may open: past it, the connection is replaced.
    static var lastStreamID: Int32 { Int32.max - 2 }

    init(maximumAnswerBytes: Int = HTTP2Transport.maximumAnswerBytes, firstStreamID: Int32 = 1) {
        self.maximumAnswerBytes = maximumAnswerBytes
        self.nextStreamID = firstStreamID
    }

    /// Streams open (requests in flight).
    var count: Int { exchanges.count }

    /// Opens a stream for a request whose answer `waiter` waits for until `deadline`.
    /// `active`: whether the channel is still open.
    mutating func open(_ waiter: Waiter, deadline: NIODeadline, active: Bool) -> Opening {
        guard active, acceptsStreams else {
            acceptsStreams = false
            return .refuse(waiter, .lost("the connection is closing", unprocessed: true))
        }
        // Ids run out after 2^30 streams: the connection is replaced.
        guard nextStreamID < Self.lastStreamID else {
            acceptsStreams = false
            return .refuse(waiter, .lost("the connection ran out of stream ids", unprocessed: true))
        }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        exchanges[id] = Exchange(waiter: waiter, deadline: deadline)
        if let timerAt, timerAt <= deadline { return .open(id, armAt: nil) }
        timerAt = deadline
        return .open(id, armAt: deadline)
    }

    /// The timer fired at `now`: the streams whose deadline passed (to fail as timed out and
    /// reset with `CANCEL`), in id order, and when to arm the timer next (nil: no stream left).
    mutating func expire(now: NIODeadline) -> (expired: [(HTTP2StreamID, Waiter)], next: NIODeadline?) {
        timerAt = nil
        var next: NIODeadline?
        var expired: [HTTP2StreamID] = []
        for (id, exchange) in exchanges {
            if exchange.deadline <= now {
                expired.append(id)
            } else if next.map({ exchange.deadline < $0 }) ?? true {
                next = exchange.deadline
            }
        }
        expired.sort()
        let waiters = expired.compactMap { id in exchanges.removeValue(forKey: id).map { (id, $0.waiter) } }
        timerAt = next
        return (waiters, next)
    }

    /// GOAWAY: no new stream; the streams above `lastStreamID` were never processed, their
    /// waiters fail (resent at once, they cannot make a duplicate).
    mutating func goAway(lastStreamID: HTTP2StreamID) -> [Waiter] {
        acceptsStreams = false
        let unprocessed = exchanges.keys.filter { $0 > lastStreamID }.sorted()
        return unprocessed.compactMap { exchanges.removeValue(forKey: $0)?.waiter }
    }

    /// A DATA frame of `bytes` (payload and padding) was read, on any stream: the increment
    /// of a connection-level WINDOW_UPDATE to send now, if one is due.
    mutating func received(bytes: Int) -> Int? {
        unacknowledged = unacknowledged.saturatingAdd(max(0, bytes))
        guard unacknowledged >= Self.connectionWindow / 2 else { return nil }
        defer { unacknowledged = 0 }
        return min(unacknowledged, Int(Int32.max))
    }

    /// A HEADERS frame on stream `id`.
    mutating func headers(_ id: HTTP2StreamID, _ headers: HPACKHeaders, endStream: Bool) -> Completion {
        guard var exchange = exchanges[id] else { return .none }
        // A malformed block (RFC 9113 §8.1.1): the stream is reset, its request lost.
        if let fault = HTTP2Fields.fault(inAnswer: headers, trailers: exchange.status != nil) {
            exchanges[id] = nil
            return .failAndReset(exchange.waiter, .lost("a malformed answer: " + fault), id, .protocolError)
        }
        if exchange.status == nil {
            guard let text = headers.first(name: ":status"), text.utf8.count == 3, let code = Int(text), (100...599).contains(code) else {
                exchanges[id] = nil
                return .failAndReset(exchange.waiter, .lost("an answer without a valid :status"), id, .protocolError)
            }
            if code < 200 {
                guard endStream else { return .none }  // informational: the final answer follows
                exchanges[id] = nil
                return .fail(exchange.waiter, .lost("the stream ended after \(code)"))
            }
            exchange.status = code
            exchange.retryAfter = headers.first(name: "retry-after")
            exchanges[id] = exchange
        }
        return endStream ? finish(id) : .none
    }

    /// A DATA frame on stream `id` (the connection window is counted by ``received(bytes:)``).
    mutating func data(_ id: HTTP2StreamID, _ bytes: ByteBuffer, endStream: Bool) -> Completion {
        guard exchanges[id] != nil else { return .none }
        let held = exchanges[id]?.body?.readableBytes ?? 0
        let room = maximumAnswerBytes - held
        if room > 0, bytes.readableBytes > 0 {
            let kept = bytes.readableBytes > room ? bytes.getSlice(at: bytes.readerIndex, length: room) ?? bytes : bytes
            if exchanges[id]?.body == nil {
                exchanges[id]?.body = kept
            } else {
                var kept = kept
                exchanges[id]?.body?.writeBuffer(&kept)
            }
        }
        return endStream ? finish(id) : .none
    }

    /// RST_STREAM from the server: lost; never processed with `REFUSED_STREAM`.
    mutating func reset(_ id: HTTP2StreamID, code: HTTP2ErrorCode) -> Completion {
        guard let exchange = exchanges.removeValue(forKey: id) else { return .none }
        return .fail(exchange.waiter, .lost("the server reset the stream (\(code))", unprocessed: code == .refusedStream))
    }

    /// The HTTP/2 handler closed stream `id` (`reason` nil: cleanly): an answer whose status
    /// came is complete; otherwise it is lost.
    mutating func closed(_ id: HTTP2StreamID, reason: HTTP2ErrorCode?) -> Completion {
        guard let exchange = exchanges[id] else { return .none }
        if reason == nil, exchange.status != nil { return finish(id) }
        exchanges[id] = nil
        return .fail(exchange.waiter, .lost("the stream closed before the answer (\(reason.map { "\($0)" } ?? "no reason"))"))
    }

    /// A stream error on `id` reported by the HTTP/2 handler.
    mutating func streamError(_ id: HTTP2StreamID, _ description: String) -> Completion {
        guard let exchange = exchanges.removeValue(forKey: id) else { return .none }
        return .fail(exchange.waiter, .lost(String(description.prefix(200))))
    }

    /// The connection closed or failed: no new stream, every waiter fails as lost.
    mutating func closeAll() -> [Waiter] {
        acceptsStreams = false
        timerAt = nil
        let waiters = exchanges.sorted { $0.key < $1.key }.map(\.value.waiter)
        exchanges.removeAll()
        return waiters
    }

    private mutating func finish(_ id: HTTP2StreamID) -> Completion {
        guard let exchange = exchanges.removeValue(forKey: id) else { return .none }
        guard let status = exchange.status else { return .fail(exchange.waiter, .lost("the stream ended without an answer")) }
        return .succeed(exchange.waiter, ProviderAnswer(status: status, retryAfter: exchange.retryAfter, body: exchange.body.map { Array(buffer: $0) } ?? []))
    }
}

extension Int {
    fileprivate func saturatingAdd(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
