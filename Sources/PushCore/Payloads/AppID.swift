/// Application ids (SPEC §11.2): 1 to 128 bytes, no `/`, no control characters.
public enum AppID {
    public static let maxBytes = 128

    public static func validate(_ app: String, field: String) throws(RequestError) {
        let count = app.utf8.count
        if count == 0 { throw RequestError(.invalid, "\(field): an application id may not be empty") }
        if count > maxBytes {
            throw RequestError(.tooLarge, "\(field): application id is \(count) bytes; the maximum is \(maxBytes)")
        }
        if app.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "/") }) {
            throw RequestError(.invalid, "\(field): application id \(quoted(app)) contains '/' or a control character")
        }
    }
}
