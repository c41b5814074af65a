import PushCore
@testable import PushDelivery
import PushHTTP
import Synchronization
import Testing

/// The resend budget of ``SenderContext``: how many losses in transit are resent at once, by
/// kind of loss. (Against real servers: `HTTP2TransportTests`' GOAWAY and reset tests.)
@Suite("Resends of requests lost in transit")
struct SenderContextTests {
    /// Answers with the scripted losses in order, then 200.
    final class ScriptedLosses: HTTPTransport {
        let script: Mutex<[TransportError]>
        let calls = Atomic<Int>(0)
        init(_ losses: [TransportError]) { script = Mutex(losses) }
        func send(_ request: OutgoingRequest, timeout: Duration) async throws(TransportError) -> ProviderAnswer {
            calls.add(1, ordering: .relaxed)
            if let loss = script.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { throw loss }
            return ProviderAnswer(status: 200, body: [])
        }
        func shutdown() async throws {}
    }

    static let reset = TransportError(.lost, "reset", lostInTransit: true)
    static let refused = TransportError(.lost, "GOAWAY, not processed", unprocessed: true)
    static let refusedConnect = TransportError(.connect, "connection refused")

    @Test(
        "losses before an answer → answered or failed, and the requests sent",
        arguments: [
            ([reset, reset], true, 3),
            ([reset, reset, reset], false, 3),
            (Array(repeating: refused, count: 10), true, 11),  // 8 unprocessed + 2 of the general budget
            (Array(repeating: refused, count: 11), false, 11),
            ([refused, reset, refused, reset, refused], true, 6),
            ([reset, reset] + Array(repeating: refused, count: 8), true, 11),
            ([reset, reset, refused, reset], false, 4),
            ([refusedConnect], false, 1),  // not lost in transit: the back-off decides
        ] as [([TransportError], Bool, Int)])
    func budget(losses: [TransportError], answered: Bool, sent: Int) async {
        let transport = ScriptedLosses(losses)
        let counters = DeliveryCounters()
        let context = SenderContext(transport: transport, timeout: .seconds(1), clock: SystemClock(), counters: counters)
        let result: ProviderAnswer?
        do {
            result = try await context.send(OutgoingRequest(url: "https://fcm.example/v1", headers: [], body: []), provider: .fcm)
        } catch {
            result = nil
        }
        #expect((result?.status == 200) == answered)
        #expect(transport.calls.load(ordering: .relaxed) == sent)
        #expect(counters.resends(provider: "fcm") == sent - 1)
    }
}
