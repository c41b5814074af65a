import PushCore
import PushJSON

/// Inputs echoed in messages, cut to a bounded length.
enum Bounded {
    /// `text` cut to at most `limit` bytes of UTF-8 (on a character boundary), `…` marking a cut.
    static func text(_ text: String, limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var result = ""
        var bytes = 0
        for character in text {
            let size = character.utf8.count
            if bytes + size > limit { break }
            result.append(character)
            bytes += size
        }
        return result + "…"
    }

    /// `text` in double quotes, JSON-escaped (control characters show), cut to 96 bytes.
    static func quoted(_ text: String) -> String {
        JSONWriter.quoted(text)
    }
}
