import PushJSON

/// Why a path or key is not acceptable.
public struct PathError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        case emptyKey
        case keyTooLong(key: String, bytes: Int)
        case forbiddenCharacter(key: String, character: UInt8)
        case pathTooLong(bytes: Int)
        case emptySegment(String)
        case dotSegment(String)
    }

    public let code: Code

    public init(_ code: Code) {
        self.code = code
    }

    public var description: String {
        switch code {
        case .emptyKey:
            return "a key is empty; keys are 1 to \(Path.maxKeyBytes) bytes"
        case .keyTooLong(let key, let bytes):
            return "key \(quoted(String(key.prefix(32))))… is \(bytes) bytes; a key is at most \(Path.maxKeyBytes) bytes"
        case .forbiddenCharacter(let key, let character):
            return "key \(quoted(key)) contains \(describe(character)); keys may not contain . $ # [ ] / or control characters"
        case .pathTooLong(let bytes):
            return "path is \(bytes) bytes in canonical form; a path is at most \(Path.maxBytes) bytes"
        case .emptySegment(let text):
            return "relative path \(quoted(text)) has an empty segment; expected keys joined by single '/'"
        case .dotSegment(let text):
            return "relative path \(quoted(text)) has a '.' or '..' segment; expected keys joined by '/'"
        }
    }

    private func describe(_ byte: UInt8) -> String {
        if byte < 0x20 || byte == 0x7F {
            let hex = String(byte, radix: 16, uppercase: true)
            return "the control character U+" + String(repeating: "0", count: 4 - hex.count) + hex
        }
        return "'\(Character(Unicode.Scalar(byte)))'"
    }
}

/// A string in double quotes, escaped as JSON would write it (so control characters show).
package func quoted(_ text: String) -> String {
    JSONWriter.quoted(text)
}
