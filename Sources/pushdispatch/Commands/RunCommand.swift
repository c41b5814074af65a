import ArgumentParser
import Logging
import PushService
import PushJSON

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the service: ingestion, matching, the outbox, delivery, expiry, the REST API, metrics and health.",
        discussion: "Stops gracefully on SIGTERM or SIGINT. Configuration: SPEC §9 and the README; PUSHDISPATCH_* variables override keys."
    )

    @Option(help: "Configuration file (YAML or JSON).")
    var config: String

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(help: "Log format on standard error: text (one readable line per event) or json (one JSON object per line).")
    var logFormat: String = "text"

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level: expected one of trace, debug, info, notice, warning, error, critical")
        }
        guard ["text", "json"].contains(logFormat) else { throw ValidationError("--log-format: expected text or json") }
        LoggingSystem.bootstrapStandardError(level: level, json: logFormat == "json")
        let configuration = try loadConfiguration(config)
        let logger = Logger(label: "pushdispatch")
        do {
            try await ServiceRuntime(configuration: configuration, logger: logger).run()
        } catch let error as ConfigurationError {
            reportConfigurationProblems(error, path: config)
            throw ExitCode(2)
        }
    }
}

/// The configuration; if it cannot be used, every problem is printed on standard error (one
/// per line, each naming its key) and the command exits with status 2.
func loadConfiguration(_ path: String, purpose: ConfigurationPurpose = .service) throws -> ServiceConfiguration {
    do {
        return try ConfigurationLoader.load(path: path, purpose: purpose)
    } catch let error as ConfigurationError {
        reportConfigurationProblems(error, path: path)
        throw ExitCode(2)
    }
}

func reportConfigurationProblems(_ error: ConfigurationError, path: String) {
    let count = error.problems.count
    printError("pushdispatch: the configuration \(path) cannot be used (\(count) problem\(count == 1 ? "" : "s")):")
    for problem in error.problems { printError("  \(problem)") }
}
