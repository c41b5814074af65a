import Foundation
import PushContracts
import PushCore
@testable import PushDelivery
import PushTestSupport
import Testing

/// At a trickle, an answer waits for the next record's claim, so that both are stored in one
/// transaction (``Dispatcher/Configuration/settleLinger``).
@Suite("answers wait for the next claim at a trickle", .processLevel, .serialized)
struct DispatcherLingerTests {
    func harness() async throws -> DeliveryHarness {
        var configuration = Dispatcher.Configuration(pauseProbe: 30_000)
        configuration.settleLinger = 60_000
        return try await DeliveryHarness(configuration: configuration)
    }

    @Test("an answer alone waits for the next record, and is stored with its claim")
    func nextRecord() async throws {
        let h = try await harness()
        defer { Task { await h.close() } }
        let first = try await h.subscribe(token: "t1")
        let second = try await h.subscribe(token: "t2", path: "/b")
        h.start()
        try await h.queue(first)
        try await h.eventually("the first send") { h.sends("fcm").count == 1 }
        // Answered, and still held: nothing else changed in the outbox.
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await h.outbox().count == 1)
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "delivered") == 0)
        try await h.queue(second, seq: 2)
        h.dispatcher.outboxChanged()
        try await h.eventually("the second send") { h.sends("fcm").count == 2 }
        try await h.eventually("the first answer stored") { try await h.outbox().map(\.entry.subscriptionHandle) == [second.1] }
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "delivered") == 1)
    }

    @Test("with nothing more to claim, the answer is stored when the linger is up")
    func deadline() async throws {
        let h = try await harness()
        defer { Task { await h.close() } }
        let subscription = try await h.subscribe(token: "t1")
        h.start()
        try await h.queue(subscription)
        try await h.eventually("the send") { h.sends("fcm").count == 1 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await h.outbox().count == 1)
        try await h.advance(by: 59_999)
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await h.outbox().count == 1)
        try await h.advance(by: 1)
        try await h.eventually("the answer stored") { try await h.outbox().isEmpty }
        #expect(h.dispatcher.counters.deliveries(provider: "fcm", outcome: "delivered") == 1)
    }

    @Test("a send that waits for a free slot does not wait for the linger: answers are stored and it starts at once")
    func waitingSend() async throws {
        var configuration = Dispatcher.Configuration(perProvider: 1, pauseProbe: 30_000)
        configuration.settleLinger = 60_000
        let h = try await DeliveryHarness(configuration: configuration)
        defer { Task { await h.close() } }
        let first = try await h.subscribe(token: "t1")
        let second = try await h.subscribe(token: "t2", path: "/b")
        try await h.queue(first)
        try await h.queue(second, seq: 2)
        h.start()
        try await h.eventually("both sent, one after the other") { h.sends("fcm").count == 2 }
        try await h.eventually("the first answer stored") { try await h.outbox().count <= 1 }
    }
}
