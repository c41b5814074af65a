import ArgumentParser

@main
struct PushDispatch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushdispatch",
        abstract: "Push-notification dispatcher for realtime JSON-tree databases.",
        subcommands: [PayloadCommand.self, DecodeCommand.self, BenchCommand.self]
    )
}
