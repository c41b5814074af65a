import ArgumentParser
import PushService

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Work with configuration files.",
        subcommands: [ConfigCheckCommand.self]
    )
}

struct ConfigCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check a configuration file as `run` would, environment overrides included.",
        discussion: """
            Exit status 0 when the service would start with it; 2 with every problem listed on standard \
            error, each naming its key (and the variable that set it), what is wrong and what was expected. \
            Secrets are never printed.
            """
    )

    @Argument(help: "The configuration file (YAML or JSON).")
    var file: String

    func run() async throws {
        let configuration = try loadConfiguration(file)
        do {
            try ServiceRuntime.check(configuration)
        } catch let error as ConfigurationError {
            reportConfigurationProblems(error, path: file)
            throw ExitCode(2)
        }
        let apps = configuration.apps.keys.sorted()
        print("\(file): ok — \(apps.count) application\(apps.count == 1 ? "" : "s")\(apps.isEmpty ? "" : ": " + apps.joined(separator: ", "))")
    }
}
