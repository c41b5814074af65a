import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// One HTTP/2 connection: its channel, the handler that runs its streams, whether it takes
/// new ones.
///
/// Streams are frames with a stream id on the connection, not child channels: a request is a
/// HEADERS and a DATA frame written by ``HTTP2ClientHandler``, its answer the frames read back
/// for that id. Requests handed over from other threads wait in a queue that one task on the
/// event loop drains, so a burst costs one wake-up of the loop and one write, not one each.
final class HTTP2Connection: Sendable {
    let channel: any Channel
    let handler: NIOLoopBound<HTTP2ClientHandler>
    let flags: ConnectionFlags
    /// Requests handed over and not yet started on the loop; whether a drain is scheduled.
    let queue = Mutex<(requests: [PendingRequest], scheduled: Bool)>(([], false))

    /// Header fields a sender's request leaves out: those that are not HTTP/2's (RFC 9113
    /// §8.2.2), `host` (`:authority` says it), and `content-length` (written from the body).
    static let connectionSpecific: Set<String> = HTTP2Fields.connectionSpecific.union(["host", "content-length"])

    init(channel: any Channel, handler: HTTP2ClientHandler, flags: ConnectionFlags) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        self.flags = flags
    }

    /// Streams open (requests in flight).
    var load: Int { flags.streams.load(ordering: .relaxed) }
    /// Whether it takes new streams.
    var usable: Bool { flags.open.load(ordering: .relaxed) && channel.isActive }

    /// One request on a new stream: `completion` gets the answer, or why there is none, once,
    /// on the connection's event loop.
    func exchange(
        _ request: OutgoingRequest, target: RequestTarget, deadline: NIODeadline,
        completion: @escaping @Sendable (Result<ProviderAnswer, HTTP2ConnectionError>) -> Void
    ) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(request.headers.count + 5)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: target.authority)
        headers.add(name: ":path", value: target.path)
        for (name, value) in request.headers {
            let lowered = name.lowercased()
            // Connection-specific fields are not HTTP/2's (RFC 9113 §8.2.2).
            if Self.connectionSpecific.contains(lowered) { continue }
            // Checked here: the HTTP/2 handler's own validation is off (HTTP2Fields).
            if let fault = HTTP2Fields.fault(requestField: lowered, value: value) {
                let error = HTTP2ConnectionError(kind: .invalidRequest, description: "HTTP/2: the request cannot be sent: \(fault) (RFC 9113 §8.2)")
                channel.eventLoop.execute { completion(.failure(error)) }
                return
            }
            headers.add(name: lowered, value: value)
        }
        headers.add(name: "content-length", value: String(request.body.count))
        // Counted before the request can reach the loop (which may answer it at once).
        flags.streams.wrappingAdd(1, ordering: .relaxed)
        let flags = self.flags
        let waiter = AnswerWaiter { result in
            flags.streams.wrappingSubtract(1, ordering: .relaxed)
            completion(result)
        }
        let pending = PendingRequest(headers: headers, body: request.body, deadline: deadline, waiter: waiter)
        let schedule = queue.withLock { queue -> Bool in
            queue.requests.append(pending)
            defer { queue.scheduled = true }
            return !queue.scheduled
        }
        if schedule {
            let handler = self.handler
            channel.eventLoop.execute {
                let requests = self.queue.withLock { queue in
                    defer {
                        queue.requests.removeAll(keepingCapacity: true)
                        queue.scheduled = false
                    }
                    return queue.requests
                }
                handler.value.start(requests)
            }
        }
    }
}

extension HTTP2Connection: PooledConnection {
    func close() {
        channel.close(promise: nil)
    }
}

/// What a connection's users read from any thread.
final class ConnectionFlags: Sendable {
    /// Streams open (requests in flight).
    let streams = Atomic<Int>(0)
    /// False once GOAWAY came, the stream ids ran out, or the connection closed.
    let open = Atomic<Bool>(true)
}
