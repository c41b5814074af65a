import Foundation
import PushCore

final class ProblemReport {
    enum Category: Sendable {
        case general
        /// Only the REST API uses it (`apps.*.auth`): `replay` serves no API and ignores these.
        case authentication
    }

    private(set) var entries: [(category: Category, message: String)] = []

    var problems: [String] { entries.map(\.message) }

    func add(_ message: String, category: Category = .general) {
        entries.append((category, message))
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
