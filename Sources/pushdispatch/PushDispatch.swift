import ArgumentParser

@main
struct PushDispatch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushdispatch",
        abstract: "Push-notification dispatcher for realtime JSON-tree databases.",
        subcommands: [
            DemoCommand.self, RunCommand.self, StatusCommand.self, MigrateCommand.self, ExportCommand.self, ImportCommand.self, ConfigCommand.self, SubscriptionsCommand.self, PayloadCommand.self, DecodeCommand.self, ReplayCommand.self,
            BenchCommand.self,
        ]
    )
}
