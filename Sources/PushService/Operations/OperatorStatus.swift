import PushCore
import PushContracts
import PushJSON
import PushDelivery
import PushEngine

/// The document behind `GET /status` and `pushdispatch status`: what an operator asks first.
enum OperatorStatus {
    static func document(
        instance: String, observability: Observability, store: any SubscriptionStore & IngestStore, deliveries: DeliveryCounters,
        ingest: IngestCounters, paused: [SenderKey: Dispatcher.Pause], cluster: (any ClusterStore)?
    ) async -> JSON {
        let now = observability.clock.now
        var outbox: JSON = ["depth": .null, "oldestAgeSeconds": .null]
        if let summary = try? await store.outboxDepth() {
            outbox = [
                "depth": .int(Int64(summary.count)),
                "oldestAgeSeconds": summary.oldest.map { .int(max(0, now.saturatingSubtracting($0)) / 1_000) } ?? .null,
            ]
        }
        let counts = (try? await store.countByKind()) ?? [:]
        let subscriptions = JSON.members(SubscriptionKind.allCases.map { ($0.rawValue, .int(Int64(counts[$0] ?? 0))) })
        func window(_ minutes: Int) -> JSON {
            JSON.members(deliveries.recent(minutes: minutes).sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })
        }
        // Destinations (push services a subscriber chose) can be many: the first 100 are listed,
        // `pausedCount` says how many there are.
        let pausedList: [JSON] = paused.sorted { $0.key < $1.key }.prefix(100).map { key, pause in
            [
                "app": .string(key.app), "kind": .string(key.kind.rawValue), "destination": key.destination.map { .string($0) } ?? .null,
                "reason": .string(String(pause.reason.prefix(300))), "sinceSeconds": .int(max(0, now.saturatingSubtracting(pause.since)) / 1_000),
            ]
        }
        let checkpoints = ((try? await store.checkpoints()) ?? []).sorted { $0.source < $1.source }.map { checkpoint -> JSON in
            ["source": .string(checkpoint.source), "lastSeq": checkpoint.lastSeq.map { .int($0) } ?? .null, "position": .int(checkpoint.position)]
        }
        // Several instances: who is there and what each owns.
        var shared: [(String, JSON)] = []
        if let store = cluster {
            let leases = (try? await store.leases()) ?? []
            let instances = (try? await store.instances(within: 3_600_000)) ?? []
            let newest = instances.map(\.heartbeatAt).max() ?? 0
            shared.append(
                (
                    "instances",
                    .array(
                        instances.map { info in
                            let owns = leases.filter { $0.owner == info.name && $0.expiresAt > newest }.map(\.app)
                            return JSON.members([
                                ("name", .string(info.name)), ("address", .string(info.address)),
                                // Every instance delivers; an owner also processes its applications' records.
                                ("role", .string(owns.isEmpty ? "delivery" : "owner")), ("startedAt", .int(info.startedAt)),
                                ("heartbeatAgeSeconds", .int(max(0, newest.saturatingSubtracting(info.heartbeatAt)) / 1_000)),
                                ("live", .bool(newest.saturatingSubtracting(info.heartbeatAt) <= 5_000)),
                                ("owns", .array(owns.map { .string($0) })),
                            ])
                        })
                ))
            shared.append(("inboxDepth", (try? await store.inboxDepth()).map { .int(Int64($0)) } ?? .null))
        }
        func counted(_ values: [String: Int]) -> JSON {
            JSON.members(values.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })
        }
        return JSON.members([
            ("instance", .string(instance)),
            ("uptimeSeconds", .int(max(0, now.saturatingSubtracting(observability.startedAt)) / 1_000)),
            ("ready", .bool(observability.readiness() == nil)),
            ("outbox", outbox),
            ("subscriptions", subscriptions),
            ("deliveries", JSON.members([("last1m", window(1)), ("last5m", window(5)), ("last15m", window(15))])),
            ("paused", .array(pausedList)),
            ("pausedCount", .int(Int64(paused.count))),
            ("ingest", .array(checkpoints)),
            ("records", JSON.members([("ingested", counted(ingest.ingested)), ("rejected", counted(ingest.rejected)), ("duplicate", counted(ingest.duplicates))])),
        ] + shared)
    }
}
