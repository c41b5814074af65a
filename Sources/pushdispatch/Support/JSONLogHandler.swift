import Foundation
import Logging
import PushCore

/// One JSON object per log line on standard error (`--log-format json`):
/// `{"level","label","message","source","ts",…metadata}`, metadata values as strings (nested
/// metadata as JSON). Messages and metadata never carry secrets (the service never logs one).
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String) {
        self.label = label
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    static func value(_ value: Logger.MetadataValue) -> JSON {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let values): .array(values.map(Self.value))
        case .dictionary(let values): .object(JSONObject(values.map { (Key($0.key), Self.value($0.value)) }))
        }
    }

    func log(
        level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String, file: String, function: String, line: UInt
    ) {
        var fields: [(Key, JSON)] = []
        let merged = metadata.merging(explicit ?? [:]) { $1 }
        for (key, value) in merged where !["ts", "level", "label", "message", "source"].contains(key) {
            fields.append((Key(key), Self.value(value)))
        }
        fields += [
            (Key("ts"), .string(Self.timestamp())), (Key("level"), .string(level.rawValue)), (Key("label"), .string(label)),
            (Key("message"), .string(message.description)), (Key("source"), .string(source)),
        ]
        var writer = JSONWriter(capacity: 256)
        writer.write(.object(JSONObject(fields)))
        FileHandle.standardError.write(Data(writer.bytes + [UInt8(ascii: "\n")]))
    }

    /// RFC 3339 in UTC with milliseconds (one value-type style, not a formatter per line).
    static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func timestamp() -> String {
        Date().formatted(style)
    }
}
