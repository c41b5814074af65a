import ArgumentParser
import PushCore
import PushJSON
import PushService

struct SubscriptionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscriptions",
        abstract: "Inspect and remove subscriptions in the configured store (operators).",
        discussion: """
            Works beside a running service: a removal reaches its matching index within a second (the store \
            logs every change and the service follows the log).
            """,
        subcommands: [List.self, Show.self, Remove.self]
    )

    struct Options: ParsableArguments {
        @Option(help: "Configuration file (YAML or JSON): its store is used.")
        var config: String
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print subscription documents, one JSON object per line.")

        @OptionGroup var options: Options
        @Option(help: "Only this application.") var app: String?
        @Option(help: "Only this user (requires --app).") var uid: String?

        func validate() throws {
            if uid != nil && app == nil { throw ValidationError("--uid needs --app") }
        }

        func run() async throws {
            var output = OutputBuffer(descriptor: 1)
            try await StoreCommands.subscriptions(try loadConfiguration(options.config), app: app, uid: uid) { page in
                for subscription in page {
                    output.bytes += Array(subscription.document.description.utf8) + [UInt8(ascii: "\n")]
                }
                try output.flush()
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print one subscription document.")

        @OptionGroup var options: Options
        @Argument(help: "Subscription id.") var id: String

        func run() async throws {
            guard let subscription = try await StoreCommands.subscription(try loadConfiguration(options.config), id: id) else {
                throw ValidationError("no subscription \(id)")
            }
            print(subscription.document.description)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a subscription (no revoke notification is sent); print it.")

        @OptionGroup var options: Options
        @Argument(help: "Subscription id.") var id: String

        func run() async throws {
            guard let removed = try await StoreCommands.remove(try loadConfiguration(options.config), id: id) else {
                throw ValidationError("no subscription \(id)")
            }
            print(removed.document.description)
        }
    }
}
