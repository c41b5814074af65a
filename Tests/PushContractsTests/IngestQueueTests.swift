import PushCore
import PushContracts
import Testing

@Suite("The ingest queue")
struct IngestQueueTests {
    func line(_ size: Int) -> IngestLine {
        IngestLine(bytes: Array(repeating: 0x61, count: size), source: "test", position: 0)
    }

    @Test("lines come out in order, in batches of at most the limit")
    func order() async {
        let queue = IngestQueue(capacityBytes: 1 << 20)
        for size in 1...10 { await queue.send(line(size)) }
        let first = await queue.receive(limit: 4)
        let second = await queue.receive(limit: 100)
        #expect(first.map(\.bytes.count) == [1, 2, 3, 4] && second.map(\.bytes.count) == [5, 6, 7, 8, 9, 10])
    }

    @Test("a sender waits while the queue is full, and goes on once it drains")
    func backPressure() async {
        let queue = IngestQueue(capacityBytes: 100)
        await queue.send(line(80))
        let sender = Task { await queue.send(line(50)) }
        try? await Task.sleep(for: .milliseconds(100))
        #expect(queue.queuedBytes == 80)  // the second line waits
        #expect(await queue.receive(limit: 10).count == 1)
        #expect(await sender.value)
        #expect(queue.queuedBytes == 50)
    }

    @Test("finishing: the receiver drains what is queued, then gets nothing; senders are refused")
    func finishing() async {
        let queue = IngestQueue(capacityBytes: 10)
        await queue.send(line(8))
        let waiting = Task { await queue.send(line(8)) }
        try? await Task.sleep(for: .milliseconds(50))
        queue.finish()
        #expect(await waiting.value == false)
        #expect(await queue.receive(limit: 10).count == 1)
        #expect(await queue.receive(limit: 10).isEmpty)
        #expect(await queue.send(line(1)) == false)
    }

    @Test("a cancelled receiver or sender stops waiting")
    func cancellation() async {
        let queue = IngestQueue(capacityBytes: 10)
        let receiver = Task { await queue.receive(limit: 1) }
        try? await Task.sleep(for: .milliseconds(50))
        receiver.cancel()
        #expect(await receiver.value.isEmpty)
        await queue.send(line(10))
        let sender = Task { await queue.send(line(10)) }
        try? await Task.sleep(for: .milliseconds(50))
        sender.cancel()
        #expect(await sender.value == false)
    }
}
