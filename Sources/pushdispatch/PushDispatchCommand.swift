import ArgumentParser
import PushJSON

/// The `pushdispatch` executable: argument parsing and calls into PushService (and PushDemo
/// for `demo`), nothing else. Benchmarks are `pushdispatch-bench`.
@main
struct PushDispatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushdispatch",
        abstract: "Push-notification dispatcher for realtime JSON-tree databases.",
        subcommands: [
            DemoCommand.self, RunCommand.self, StatusCommand.self, MigrateCommand.self, ExportCommand.self, ImportCommand.self, ConfigCommand.self,
            SubscriptionsCommand.self, RulesCommand.self, CheckpointsCommand.self, PayloadCommand.self, DecodeCommand.self, ReplayCommand.self,
            HistoryCommand.self, SendersCommand.self, RecoverCommand.self, DeadLetterCommand.self,
        ]
    )
}
