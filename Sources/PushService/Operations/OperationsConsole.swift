import PushAPI
import PushContracts
import PushCore
import PushDelivery
import PushJSON
import PushMatching

/// What the operations API (``OperationsAPI``, SPEC §13) acts on in a running service: the
/// store's history, this instance's dispatcher (its paused senders, its feed of attempts), the
/// applications' read rules over the trees the service holds.
struct OperationsConsole: OperationsControl {
    let store: any HistoryStore & DeliveryStore
    let dispatcher: Dispatcher
    let operations: Operations
    /// Each application's read rules in force.
    let rules: [String: ReadRules]
    let trees: any TreeSource
    let clock: any ServiceClock

    var history: any HistoryStore { store }
    var now: Int64 { clock.now }

    func overview() async -> JSON {
        await operations.status()
    }

    func pausedSenders() -> [PausedSender] {
        dispatcher.paused.sorted { $0.key < $1.key }.map { key, pause in
            PausedSender(
                app: key.app, provider: OperationsAPI.providerName(key.kind), destination: key.destination, reason: pause.reason, since: pause.since,
                probeAt: pause.probeAt)
        }
    }

    func resume(app: String, kind: SubscriptionKind, destination: String?) -> Bool {
        dispatcher.resume(SenderKey(app: app, kind: kind, destination: destination))
    }

    func watch() -> AsyncStream<DeliveryAttempt> {
        dispatcher.feed.watch()
    }

    func simulate(app: String, path text: String, auth: JSON) async throws -> JSON {
        let path: Path
        do {
            path = try Path(text)
        } catch {
            throw RequestError(.invalid, "path: \(error)")
        }
        guard let rules = rules[app] else { throw RequestError(.invalid, "app: \(JSONWriter.quoted(app)) is not a configured application") }
        let tree = rules.readsData ? try await trees.tree(app: app) : DataTree()
        let decision = rules.evaluate(path: path, auth: auth.isNull ? nil : auth, tree: tree, now: clock.now)
        let trace: [JSON] = decision.trace.map { step in
            let outcome: JSON =
                switch step.outcome {
                case .granted: "granted"
                case .denied: "denied"
                case .failed(let message): .string("error: " + message)
                }
            return .object(JSONObject([(Key("rule"), .string(step.rule)), (Key("path"), .string(step.path.string)), (Key("outcome"), outcome)]))
        }
        return .object(
            JSONObject([
                (Key("allowed"), .bool(decision.allowed)), (Key("grantedBy"), decision.grantedBy.map { .string($0) } ?? .null),
                (Key("reads"), .array(decision.reads.map { .string($0.string) })), (Key("trace"), .array(trace)),
            ]))
    }
}
