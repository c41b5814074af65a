import Foundation
import PushService

extension FuzzTarget {
    /// `config`: the service's configuration (SPEC §9), YAML or JSON text through
    /// `ConfigurationLoader.load(text:…)` (Yams, the key checks, the files it names, resolved
    /// against `fixtures/config/`, with the environment of the sample configuration).
    ///
    /// - Never a trap or a hang: a configuration, or a `ConfigurationError` (no other error).
    /// - Each problem and each warning: non-empty and bounded.
    /// - No secret in a message: the environment's values never; an inline secret
    ///   (`hs256Secret`, `clientSecret`, `secret`, `privateKey`, `vapidPrivateKey`,
    ///   `operationsToken`, `postgres`) only if the message does not change when the secret is.
    public static func config(_ data: UnsafeBufferPointer<UInt8>) throws(FuzzViolation) {
        guard let text = String(validating: Array(data), as: UTF8.self) else { return }  // the loader refuses non-UTF-8 files
        let messages = try configMessages(text)
        for (name, value) in configEnvironment where !text.contains(value) {
            for message in messages { try Check.doesNotEcho(message, secret: value, "the configuration's message (the variable \(name))") }
        }
        for (secret, written) in inlineSecrets(text) where secret.utf8.count >= 12 && text.components(separatedBy: secret).count == 2
            && messages.contains(where: { $0.contains(secret) }) && !messages.contains(where: { $0.contains(written) })
        {
            // (A message holding the key with its value echoes a key of the input, which the
            // fuzzer may have made of a secret's text: not a secret read.)
            // Is it the secret, or text the message has anyway? The same configuration with
            // another secret of the same length tells.
            let other = String(repeating: "Q", count: secret.count)
            guard !text.contains(other) else { continue }
            let changed = try configMessages(text.replacingOccurrences(of: secret, with: other))
            if let message = changed.first(where: { $0.contains(other) }) {
                throw FuzzViolation("the configuration's message echoes the secret \(Check.excerpt(secret, 40)): \(Check.excerpt(message))")
            }
        }
    }

    /// The problems, or the warnings, of loading `text`.
    static func configMessages(_ text: String) throws(FuzzViolation) -> [String] {
        do {
            let configuration = try ConfigurationLoader.load(text: text, baseDirectory: configBaseDirectory, environment: configEnvironment, source: "fuzz.yaml")
            for warning in configuration.warnings { try Check.message(warning, "a configuration warning") }
            return configuration.warnings
        } catch let error as ConfigurationError {
            try Check.that(!error.problems.isEmpty, "a ConfigurationError without problems")
            for problem in error.problems { try Check.message(problem.description, "a configuration problem") }
            return error.problems.map(\.description)
        } catch let violation as FuzzViolation {
            throw violation
        } catch {
            throw FuzzViolation("the configuration loader threw \(type(of: error)), not a ConfigurationError: \(error)")
        }
    }

    /// Where relative paths resolve: the sample configuration's folder, so that its files exist.
    static let configBaseDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fixtures/config").path

    /// The variables `fixtures/config/sample.yaml` and `demo.yaml` name.
    static let configEnvironment = [
        "TOTO_AUTH_SECRET": "env-auth-secret-of-at-least-thirty-two-bytes",
        "TOTO_HMS_SECRET": "env-hms-client-secret-0123456789",
        "TOTO_WEBHOOK_SECRET": "env-webhook-secret-0123456789",
        "PUSHDISPATCH_OPS_TOKEN": "env-operations-token-0123456789",
    ]

    /// Values given inline to the keys that hold secrets (not `env:` or `file:` references).
    static func inlineSecrets(_ text: String) -> [(value: String, written: String)] {
        let secretKeys = try! Regex(#"(hs256Secret|clientSecret|secret|privateKey|vapidPrivateKey|operationsToken|postgres)["']?[ \t]*:[ \t]*["']?([^"'\s,}\]#]+)"#)
        return text.matches(of: secretKeys).compactMap { match in
            guard let value = match.output[2].substring.map(String.init), !value.hasPrefix("env:"), !value.hasPrefix("file:") else { return nil }
            return (value, String(match.output[0].substring ?? ""))
        }
    }
}
