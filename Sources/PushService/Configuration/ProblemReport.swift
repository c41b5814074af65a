import Foundation
import PushCore

final class ProblemReport {
    enum Category: Sendable {
        case general
        /// Only the REST API uses it (`apps.*.auth`): `replay` serves no API and ignores these.
        case authentication
    }

    private(set) var entries: [(category: Category, problem: ConfigurationError.Problem)] = []

    var problems: [ConfigurationError.Problem] { entries.map(\.problem) }

    /// Records a problem with `key` (as messages name it; `nil` when it is about no one key).
    func add(_ key: String?, _ kind: ConfigurationError.Kind, _ message: String, category: Category = .general) {
        entries.append((category, ConfigurationError.Problem(key: key, kind: kind, message: message)))
    }

    /// What does not stop the service but the operator should fix.
    private(set) var warnings: [String] = []

    func warn(_ message: String) {
        warnings.append(message)
    }
}

/// One object of the configuration, with its key path, recording keys its schema lacks.
///
/// Accessors return `nil` for an absent (or `null`) key, and also for a bad value, after
/// recording the problem: the caller then uses the default and decoding goes on.
