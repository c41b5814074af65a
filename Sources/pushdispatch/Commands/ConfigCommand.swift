import ArgumentParser
import PushService
import PushJSON

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
            Exit status 0 when the service would start with it (warnings, such as an application without read \
            rules, are printed on standard error); 2 with every problem listed on standard error, each naming \
            its key (and the variable that set it), what is wrong and what was expected (a read rule that does \
            not parse: its location in the rules and the column). Secrets are never printed.
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
        for warning in configuration.warnings { printError("warning: \(warning)") }
        let apps = configuration.apps.keys.sorted()
        print("\(file): ok — \(apps.count) application\(apps.count == 1 ? "" : "s")\(apps.isEmpty ? "" : ": " + apps.joined(separator: ", "))")
    }
}
