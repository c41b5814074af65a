import PushCore
import PushJSON

/// Where rejected lines go (SPEC §4, §11.3): the dead-letter file in the service. Appending
/// returns once the letters are durable, so that the checkpoint that skips them can commit.
public protocol DeadLetterSink: Sendable {
    /// Where the letters go, for messages (a path).
    var location: String { get }
    /// Appends the letters and makes them durable.
    func append(_ letters: [DeadLetter]) throws
}

/// One rejected line, as the dead-letter file records it (SPEC §11.3).
public struct DeadLetter: Sendable, Equatable {
    /// Milliseconds since the epoch.
    public var timestamp: Int64
    public var source: String
    public var position: Int64
    public var reason: String
    public var line: [UInt8]

    public init(timestamp: Int64, source: String, position: Int64, reason: String, line: [UInt8]) {
        self.timestamp = timestamp
        self.source = source
        self.position = position
        self.reason = reason
        self.line = line
    }

    /// `{"ts":…,"source":…,"position":…,"reason":…,"line":…}`. A line that is not valid UTF-8
    /// cannot be a JSON string as it is: `line` then shows it with U+FFFD in place of the bad
    /// bytes, and `lineBase64` holds its exact bytes.
    public var json: [UInt8] {
        var writer = JSONWriter(capacity: line.count + 128)
        writer.raw("{\"ts\":")
        writer.write(.int(timestamp))
        writer.raw(",\"source\":")
        writer.writeString(source)
        writer.raw(",\"position\":")
        writer.write(.int(position))
        writer.raw(",\"reason\":")
        writer.writeString(reason)
        writer.raw(",\"line\":")
        let text = String(decoding: line, as: UTF8.self)
        writer.writeString(text)
        if !Self.isValidUTF8(line) {
            writer.raw(",\"lineBase64\":\"")
            writer.raw(Array(Self.base64(line).utf8))
            writer.raw("\"")
        }
        writer.raw("}\n")
        return writer.bytes
    }

    static func isValidUTF8(_ bytes: [UInt8]) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = bytes[index]
            let b1 = index + 1 < bytes.count ? bytes[index + 1] : 0
            let b2 = index + 2 < bytes.count ? bytes[index + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(index + 1 < bytes.count ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}


/// A dead letter as the operations API lists it (SPEC §13.3): where and why it was refused,
/// and the line itself never whole (it holds a record's data): its length, the start of its
/// SHA-256, its first characters, and its `app` and `seq` when it is a JSON object that names
/// them.
public struct DeadLetterEntry: Sendable, Equatable {
    /// Its place in the files (the rotated one first): what `cursor` counts.
    public var index: Int64
    public var timestamp: Int64
    public var source: String
    public var position: Int64
    public var reason: String
    public var app: String?
    public var seq: Int64?
    public var bytes: Int
    /// The first 12 hex digits of the line's SHA-256.
    public var sha256: String
    /// At most ``DeadLetterEntry/headCharacters`` characters of the line.
    public var head: String

    public static let headCharacters = 48

    public init(
        index: Int64, timestamp: Int64, source: String, position: Int64, reason: String, app: String?, seq: Int64?, bytes: Int, sha256: String,
        head: String
    ) {
        self.index = index
        self.timestamp = timestamp
        self.source = source
        self.position = position
        self.reason = reason
        self.app = app
        self.seq = seq
        self.bytes = bytes
        self.sha256 = sha256
        self.head = head
    }
}

/// Which dead letters to list.
public struct DeadLetterFilter: Sendable, Equatable {
    /// A reason's label (`too_long`, `not_json`, `invalid_seq`, …): the reason text starts with it.
    public var reason: String?
    public var app: String?
    /// Refused at or after / before this time (milliseconds since the epoch).
    public var since: Int64?
    public var until: Int64?

    public init(reason: String? = nil, app: String? = nil, since: Int64? = nil, until: Int64? = nil) {
        self.reason = reason
        self.app = app
        self.since = since
        self.until = until
    }
}

/// What a redrive of dead letters did (`POST /ops/v1/deadletter/redrive`).
public struct RedriveResult: Sendable, Equatable {
    /// Valid now, and applied (with `dryRun`: would be).
    public var applied = 0
    /// Still refused (the same checks as a source's line, but the order of `seq`), or refused
    /// when applied.
    public var refused = 0
    /// Redriven before: applied once already.
    public var alreadyRedriven = 0
    /// Refused for their `seq` (a resend of a record already applied, or out of order): never
    /// redriven, since applying them would apply a record twice or out of order.
    public var notRedrivable = 0

    public init() {}
}
