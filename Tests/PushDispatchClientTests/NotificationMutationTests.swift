import Foundation
import PushCore
import PushJSON
import PushDelivery
import PushDispatchClient
import PushTestSupport
import Testing

/// Seeded, bounded mutation suites over what a device receives: a damaged payload or webhook
/// request never crashes the reader and is refused with a message; a signed or encrypted
/// payload that is accepted is the one the service sealed.
@Suite("Bad input: damaged notifications and webhook requests")
struct NotificationMutationTests {
    static let rounds = 1_000

    /// Valid payloads to damage: protection, payload bytes.
    static func originals() throws -> [(PayloadFixtures.Protection, [UInt8])] {
        let event = Event(app: "toto", path: "/rooms/r1", body: .childEvent(ChildDiff(before: ["a": 1], after: ["b": ["c": "d"], "a": 2])))
        return try [.v1, .es256, .hs256, .dir, .ecdhES].map { ($0, try PayloadFixtures.payload(event, $0).bytes) }
    }

    /// The refusal is a NotificationError with a message a person can read, bounded.
    static func checkRefusal(_ error: NotificationError, _ context: String) {
        #expect(!error.message.isEmpty && error.message.utf8.count <= 700, "\(context): \(error)")
    }

    @Test("damaged bytes: refused with a message, or (unsigned v1 only) another valid notification", arguments: [1, 2, 3] as [UInt64])
    func damagedBytes(seed: UInt64) throws {
        let reader = try NotificationReader(app: "toto", keys: PayloadFixtures.readerKeys)
        var mutator = Mutator(seed: seed)
        for (protection, original) in try Self.originals() {
            let genuine = try reader.read(json: original)
            for round in 0..<Self.rounds {
                let damaged = mutator.mutateBytes(original)
                do {
                    let read = try reader.read(json: damaged)
                    if protection != .v1 {
                        #expect(read == genuine, "seed \(seed) round \(round) \(protection): a damaged payload read as another notification")
                    }
                } catch {
                    Self.checkRefusal(error, "seed \(seed) round \(round) \(protection)")
                }
            }
        }
    }

    @Test("damaged fields of the data map: refused with a message, or the same notification when sealed", arguments: [4, 5, 6] as [UInt64])
    func damagedFields(seed: UInt64) throws {
        let reader = try NotificationReader(app: "toto", keys: PayloadFixtures.readerKeys)
        var mutator = Mutator(seed: seed)
        for (protection, original) in try Self.originals() {
            let genuine = try reader.read(json: original)
            let json = try JSONParser.parse(original)
            for round in 0..<Self.rounds {
                let damaged = mutator.mutateJSON(json)
                var map: [String: String]? = [:]
                if case .object(let object) = damaged {
                    for (key, value) in object { if let text = value.stringValue { map?[key.string] = text } else { map = nil } }
                } else {
                    map = nil
                }
                var writer = JSONWriter()
                writer.write(damaged)
                for attempt in [map.map { m in { try reader.read(m) } }, { try reader.read(json: writer.bytes) }].compactMap({ $0 }) {
                    do {
                        let read = try attempt()
                        if protection != .v1 { #expect(read == genuine, "seed \(seed) round \(round) \(protection)") }
                    } catch let error as NotificationError {
                        Self.checkRefusal(error, "seed \(seed) round \(round) \(protection)")
                    } catch {
                        Issue.record("seed \(seed) round \(round): not a NotificationError: \(error)")
                    }
                }
            }
        }
    }

    @Test("damaged webhook bodies, signed again with the secret: the parser refuses them with a message or reads a notification", arguments: [7, 8] as [UInt64])
    func damagedWebhookBodies(seed: UInt64) throws {
        let receiver = try WebhookReceiver(secret: WebhookReceiverTests.secret, app: "toto")
        let secret = try WebhookSecret(WebhookReceiverTests.secret)
        let event = Event(app: "toto", path: "/orders", body: .childEvent(ChildDiff(before: ["a": 1], after: ["b": 2])))
        let (headers, body) = try WebhookReceiverTests.request(event)
        var mutator = Mutator(seed: seed)
        var read = 0
        for round in 0..<Self.rounds {
            let damaged = mutator.mutateBytes(body)
            // Unsigned damage is refused at the signature, always.
            if damaged != body {
                do {
                    _ = try receiver.notification(headers: headers, body: damaged, now: WebhookReceiverTests.now)
                    Issue.record("seed \(seed) round \(round): a damaged body verified")
                } catch {
                    #expect(error.code == .badWebhookSignature)
                }
            }
            // Signed again (as by a holder of the secret): the body parser is what judges it.
            var signed = headers
            signed["webhook-signature"] = secret.signature(id: "msg_1_7", timestamp: 1_800_000_000, body: damaged)
            do {
                _ = try receiver.notification(headers: signed, body: damaged, now: WebhookReceiverTests.now)
                read += 1
            } catch {
                Self.checkRefusal(error, "seed \(seed) round \(round) webhook")
            }
        }
        #expect(read < Self.rounds, "some damage must be refused")
    }
}
