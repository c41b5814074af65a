import Foundation
import Logging
import PushCore
import PushJSON

/// One JSON object per log line on standard error (`--log-format json`):
/// `{"level","label","message","source","ts",…metadata}`, metadata values as strings (nested
/// metadata as JSON). Messages and metadata never carry secrets (the service never logs one).
public struct JSONLogHandler: LogHandler {
    let label: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]

    public init(label: String) {
        self.label = label
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
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

    public func log(event: LogEvent) {
        var fields: [(Key, JSON)] = []
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for (key, value) in merged where !["ts", "level", "label", "message", "source"].contains(key) {
            fields.append((Key(key), Self.value(value)))
        }
        fields += [
            (Key("ts"), .string(Self.timestamp())), (Key("level"), .string(event.level.rawValue)), (Key("label"), .string(label)),
            (Key("message"), .string(event.message.description)), (Key("source"), .string(event.source)),
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

extension LoggingSystem {
    /// Logs on standard error from `level` up, one readable line per event (`json`: one JSON
    /// object per line, ``JSONLogHandler``).
    public static func bootstrapStandardError(level: Logger.Level, json: Bool = false) {
        bootstrap { label in
            if json {
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
