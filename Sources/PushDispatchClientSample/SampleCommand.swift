import ArgumentParser

/// `pushdispatch-client-sample`: a sample app of the PushDispatchClient library. It subscribes
/// a device to nodes of an application, then reads the notifications the device receives and
/// prints them, checked and decoded.
@main
struct SampleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushdispatch-client-sample",
        abstract: "A sample app of the PushDispatchClient library: subscribe, then read notifications.",
        subcommands: [
            SubscribeCommand.self, UnsubscribeCommand.self, ListCommand.self, UnsubscribeAllCommand.self, UpdateTokenCommand.self,
            QueueCommand.self, ReadCommand.self, DevTokenCommand.self,
        ])
}
