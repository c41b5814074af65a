import PushJSON

/// The invariants every fuzz body shares.
enum Check {
    /// Longest message a refusal may carry, in UTF-8 bytes (house style: messages echo inputs
    /// cut to a bounded length).
    static let maxMessageBytes = 1_000

    /// Throws `what` unless `condition` holds.
    static func that(_ condition: Bool, _ what: @autoclosure () -> String) throws(FuzzViolation) {
        if !condition { throw FuzzViolation(what()) }
    }

    /// A refusal's message: non-empty and at most ``maxMessageBytes``.
    static func message(_ text: String, _ what: String) throws(FuzzViolation) {
        try that(!text.isEmpty, "\(what): the message is empty")
        let length = text.utf8.count
        try that(length <= maxMessageBytes, "\(what): the message is \(length) bytes, more than \(maxMessageBytes): \(excerpt(text))")
    }

    /// `text` does not contain `secret` (secrets shorter than 12 bytes are not checked: a short
    /// one can occur in any message by chance).
    static func doesNotEcho(_ text: String, secret: some StringProtocol, _ what: String) throws(FuzzViolation) {
        guard secret.utf8.count >= 12 else { return }
        try that(!text.contains(secret), "\(what): the message echoes a secret (\(secret.utf8.count) bytes): \(excerpt(text))")
    }

    /// The beginning of `text`, for a violation's description.
    static func excerpt(_ text: String, _ limit: Int = 240) -> String {
        let bytes = Array(text.utf8)
        let shown = String(decoding: JSONWriter.utf8Prefix(bytes, maxBytes: limit), as: UTF8.self).debugDescription
        return bytes.count > limit ? shown + "… (\(bytes.count) bytes)" : shown
    }

    /// The beginning of `bytes`, for a violation's description.
    static func excerpt(_ bytes: some Collection<UInt8>) -> String {
        excerpt(String(decoding: bytes, as: UTF8.self))
    }
}

/// Reads a fuzz input as a few parts: selector bytes at the front, then the rest.
struct FuzzInput {
    private(set) var bytes: ArraySlice<UInt8>

    init(_ data: UnsafeBufferPointer<UInt8>) {
        bytes = Array(data)[...]
    }

    /// The next byte (0 when none is left).
    mutating func byte() -> UInt8 {
        bytes.popFirst() ?? 0
    }

    /// The bytes up to the first `separator` (all that is left when there is none), consumed
    /// with the separator.
    mutating func part(until separator: UInt8) -> [UInt8] {
        guard let index = bytes.firstIndex(of: separator) else {
            defer { bytes = [] }
            return Array(bytes)
        }
        defer { bytes = bytes[(index + 1)...] }
        return Array(bytes[..<index])
    }

    /// What is left.
    var rest: [UInt8] { Array(bytes) }
}
