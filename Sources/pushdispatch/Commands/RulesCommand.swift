import ArgumentParser
import PushCore
import PushJSON
import PushMatching
import PushService

struct RulesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "Work with read rules (SPEC §12).",
        subcommands: [RulesCheckCommand.self]
    )
}

struct RulesCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Before deploying rules: which subscriptions they would revoke; or whether an auth may read one path, rule by rule.",
        discussion: """
            Without --path: evaluates every subscription of the applications with rules against the stored data, \
            as a start of the service would, and lists those the rules would revoke (permission_denied). With --rules, \
            that file replaces the configured rules of --app (or of the only application). With --path (and --auth, \
            the rules' auth as JSON: {"uid": "u1", "token": {claims}}; default none): every .read rule evaluated on the \
            way to the path, as the Firebase rules simulator shows it. Reads the configured store, never writes it.

            Exit status: 0 when no subscription would be revoked (with --path: the read is allowed), 1 when some \
            would be (the read is denied), 2 when the configuration or the rules cannot be used.
            """
    )

    @Option(help: "The service's configuration file.") var config: String
    @Option(help: "A rules file to check instead of the configured rules.") var rules: String?
    @Option(help: "The application the rules are for (default: the only one configured).") var app: String?
    @Option(help: "Evaluate read access to this path only.") var path: String?
    @Option(help: "With --path: the rules' auth, as JSON (for example '{\"uid\":\"u1\"}'); default: unauthenticated.") var auth: String?

    func validate() throws {
        if auth != nil && path == nil { throw ValidationError("--auth goes with --path") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(config, purpose: .replay)
        let replacing: ReadRules?
        do {
            replacing = try rules.map { file throws(RulesProblem) in try ConfiguredRules.load(file: file).rules }
        } catch {
            printError("pushdispatch: \(error.described(at: "--rules"))")
            throw ExitCode(2)
        }
        var target = app
        if target == nil && (replacing != nil || path != nil) {
            guard configuration.apps.count == 1, let only = configuration.apps.keys.first else {
                throw ValidationError("--app: the configuration has \(configuration.apps.count) applications; name the one to check")
            }
            target = only
        }
        let now = SystemClock().now
        let passed: Bool
        do {
            if let path {
                passed = try await simulate(configuration, app: target!, rules: replacing, path: path, now: now)
            } else {
                passed = try await audit(configuration, replacing: target.flatMap { app in replacing.map { [app: $0] } } ?? [:], now: now)
            }
        } catch let error as ConfigurationError {
            printError("pushdispatch: \(error)")
            throw ExitCode(2)
        }
        if !passed { throw ExitCode(1) }
    }

    /// Prints the evaluation; whether the read is allowed.
    func simulate(_ configuration: ServiceConfiguration, app: String, rules: ReadRules?, path text: String, now: Int64) async throws -> Bool {
        let path: Path
        do { path = try Path(text) } catch { throw ValidationError("--path: \(error)") }
        var authValue: JSON?
        if let auth {
            guard let parsed = try? JSONParser.parse(Array(auth.utf8)), parsed.isNull || parsed.objectValue != nil else {
                throw ValidationError("--auth: expected a JSON object such as {\"uid\":\"u1\",\"token\":{\"admin\":true}}, or null")
            }
            authValue = parsed.isNull ? nil : parsed
        }
        let readRules = rules ?? configuration.apps[app]?.readRules ?? .authenticated
        let decision = try await RulesCheck.simulate(configuration, app: app, rules: readRules, path: path, auth: authValue, now: now)
        for step in decision.trace {
            let outcome: String
            switch step.outcome {
            case .granted: outcome = "true: granted"
            case .denied: outcome = "false"
            case .failed(let message): outcome = "error (false): \(message)"
            }
            print("  \(step.rule) at \(step.path): \(outcome)")
        }
        if decision.trace.isEmpty { print("  no .read rule on the way to \(path)") }
        print("read \(path): \(decision.allowed ? "allowed" : "denied")\(decision.grantedBy.map { " by \($0)" } ?? "")")
        if !decision.reads.isEmpty { print("data read: " + decision.reads.map(\.string).joined(separator: ", ")) }
        return decision.allowed
    }

    /// Prints the audit; whether no subscription would be revoked.
    func audit(_ configuration: ServiceConfiguration, replacing: [String: ReadRules], now: Int64) async throws -> Bool {
        let audits = try await RulesCheck.audit(configuration, replacing: replacing, now: now)
        if audits.isEmpty { print("no application has read rules: every authenticated client may read every node") }
        for audit in audits {
            print("\(audit.app): \(audit.checked) subscription\(audit.checked == 1 ? "" : "s") checked, \(audit.revoked.count) would be revoked (permission_denied)")
            for revocation in audit.revoked {
                print("  \(revocation.id)  uid \(revocation.uid)  \(revocation.path)  (\(revocation.kind.rawValue))")
            }
        }
        return audits.allSatisfy { $0.revoked.isEmpty }
    }
}
