import Foundation

/// The recorded provider answers under `fixtures/providers/`: the fakes answer with them, the
/// classifier tests read them.
public enum ProviderFixtures {
    /// `fixtures/` of the source tree.
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures")

    public struct Answer: Sendable {
        public var status: Int
        public var retryAfter: String?
        public var body: [UInt8]
    }

    /// A recorded answer by name (`fcm-unregistered`, `hms-partial`, …).
    public static func answer(_ name: String) -> Answer {
        let folder = root.appendingPathComponent("providers")
        guard let body = try? Data(contentsOf: folder.appendingPathComponent(name + ".json")) else {
            fatalError("fixtures/providers/\(name).json is missing")
        }
        let table = (try? JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent("answers.json")))) as? [String: Any]
        let entry = table?[name] as? [String: Any]
        guard let status = entry?["status"] as? Int else { fatalError("fixtures/providers/answers.json has no status for \(name)") }
        return Answer(status: status, retryAfter: entry?["retryAfter"] as? String, body: Array(body))
    }
}
