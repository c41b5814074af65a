import HTTPTypes
import Hummingbird
import PushCore
import Synchronization

/// The console's sign-in sessions (SPEC §13.4): the operations token is given once, and the
/// browser then holds a random session id in an `HttpOnly`, `SameSite=Strict` cookie, valid
/// for ``lifetime``. Each session has its own anti-forgery token, which state-changing requests
/// send in `X-CSRF-Token` (a cookie alone never changes anything). In memory: a restart signs
/// everybody out.
public final class ConsoleSessions: Sendable {
    struct Session {
        var csrf: String
        var expires: Int64
    }

    public static let cookieName = "pushdispatch_console"
    /// Milliseconds: one hour.
    public static let lifetime: Int64 = 3_600_000
    /// Sessions held at most (the oldest goes first).
    static let maximum = 256
    let sessions = Mutex<[String: Session]>([:])
    let clock: any ServiceClock

    public init(clock: any ServiceClock) {
        self.clock = clock
    }

    /// 32 random bytes, base64url.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = 0
            for byte in chunk { value = value << 8 | Int(byte) }
            value <<= 8 * (3 - chunk.count)
            for position in 0..<(chunk.count + 1) { out.append(alphabet[(value >> (18 - 6 * position)) & 63]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A new session: its id (the cookie) and its anti-forgery token.
    func create() -> (id: String, csrf: String) {
        let id = Self.randomToken()
        let csrf = Self.randomToken()
        let now = clock.now
        sessions.withLock { sessions in
            sessions = sessions.filter { $0.value.expires > now }
            if sessions.count >= Self.maximum, let oldest = sessions.min(by: { $0.value.expires < $1.value.expires })?.key {
                sessions.removeValue(forKey: oldest)
            }
            sessions[id] = Session(csrf: csrf, expires: now.saturatingAdding(Self.lifetime))
        }
        return (id, csrf)
    }

    /// The session id of the request's cookie, if it names a live session, and its session.
    func session(_ request: Request) -> (id: String, session: Session)? {
        guard let id = Self.cookie(request) else { return nil }
        let now = clock.now
        return sessions.withLock { sessions in
            guard let session = sessions[id] else { return nil }
            guard session.expires > now else {
                sessions.removeValue(forKey: id)
                return nil
            }
            return (id, session)
        }
    }

    func remove(_ id: String) {
        _ = sessions.withLock { $0.removeValue(forKey: id) }
    }

    /// The value of this console's cookie in the request, if any.
    static func cookie(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for part in header.split(separator: ";") {
                let pair = part.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces) == cookieName else { continue }
                let value = pair[1].trimmingCharacters(in: .whitespaces)
                return value.isEmpty || value.utf8.count > 128 ? nil : value
            }
        }
        return nil
    }

    /// The `Set-Cookie` value of a session (or of its end, with `nil`).
    static func setCookie(_ id: String?) -> String {
        guard let id else { return "\(cookieName)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0" }
        return "\(cookieName)=\(id); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(lifetime / 1_000)"
    }
}
