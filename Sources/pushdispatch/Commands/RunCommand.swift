import ArgumentParser
import Logging
import PushService

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the service: the subscription REST API, expiry, and (as they land) ingest and delivery.",
        discussion: "Stops gracefully on SIGTERM or SIGINT. Configuration: SPEC §9 and the README; PUSHDISPATCH_* variables override keys."
    )

    @Option(help: "Configuration file (YAML or JSON).")
    var config: String

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level: expected one of trace, debug, info, notice, warning, error, critical")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let configuration = try loadConfiguration(config)
        let logger = Logger(label: "pushdispatch")
        do {
            try await ServiceRuntime(configuration: configuration, logger: logger).run()
        } catch let error as ConfigurationError {
            throw ValidationError(error.description)
        }
    }
}

/// The configuration, or a validation error that names the key.
func loadConfiguration(_ path: String) throws -> ServiceConfiguration {
    do {
        return try ConfigurationLoader.load(path: path)
    } catch let error as ConfigurationError {
        throw ValidationError(error.description)
    }
}
