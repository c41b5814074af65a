import ArgumentParser
import Foundation
import PushCore
import PushJSON
import PushDispatchClient

/// `read`: reads the data maps this device received, one JSON object per line on standard
/// input, and prints each notification, checked and decoded (or why it was refused).
///
/// A line is a data map (`{"srv":"webcom","evt":"…","ver":"v2"}`), or a line of
/// `pushdispatch replay` (`{"seq":…,"context":…,"payload":{…}}`), of which the payloads
/// for `--device` are read.
struct ReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read", abstract: "Read received data maps (one JSON object per line) and print the notifications.")

    @OptionGroup var options: ClientOptions

    func run() async throws {
        let service = try options.service()
        let device = try options.device.map(ClientOptions.deviceToken)
        var refused = 0
        while let line = readLine(strippingNewline: true) {
            guard !line.isEmpty else { continue }
            guard let data = Self.dataMap(line, device: device) else { continue }
            do {
                Self.emit(Self.describe(try await service.notification(from: data)))
            } catch {
                refused += 1
                Self.emit("refused: \(error)")
            }
        }
        if refused > 0 { throw ExitCode(1) }
    }

    /// The data map of a line; `nil` for a replay line addressed to another device or a
    /// webhook, or a line that is not a JSON object of strings.
    static func dataMap(_ line: String, device: DeviceToken?) -> [String: String]? {
        guard case .object(var object)? = try? JSONParser.parse(line) else {
            emit("skipped: not a JSON object")
            return nil
        }
        if case .object(let payload)? = object[Key("payload")] {
            guard object[Key("kind")]?.stringValue != "webhook" else { return nil }
            if let device, object[Key("context")]?.stringValue != device.value { return nil }
            object = payload
        }
        var data: [String: String] = [:]
        for (key, value) in object {
            guard case .string(let text) = value else {
                emit("skipped: \(key.string) is not a string; a data map holds strings")
                return nil
            }
            data[key.string] = text
        }
        return data
    }

    /// Writes one line to standard output at once (not buffered: the reader of a pipe sees
    /// each notification as it is read).
    static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// One line for a person: the node, the event, its status and protection, what to do.
    static func describe(_ notification: PushNotification) -> String {
        var text = notification.path + " "
        switch notification.event {
        case .value(let value): text += "value " + (value?.description ?? "null")
        case .noData: text += "noData"
        case .childEvent(let changes):
            func object(_ members: [String: JSON]) -> String {
                JSON.object(JSONObject(members.map { (Key($0.key), $0.value) })).description
            }
            text += "childEvent added \(object(changes.added)) changed \(object(changes.changed)) removed \(JSON.array(changes.removed.map { .string($0) }).description)"
        case .revoked(let reason): text += "revoked \(reason)"
        }
        text += " (\(notification.status.rawValue), \(notification.format.rawValue), \(notification.protection))"
        switch notification.followUp {
        case .none: break
        case .readNode: text += " → read the node"
        case .readChildren(let keys): text += " → read the children " + keys.joined(separator: ", ")
        case .subscribeAgain: text += " → subscribe again"
        case .subscriptionEnded: text += " → the subscription ended"
        }
        return text
    }
}
