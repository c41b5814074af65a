import PushCore
import PushJSON
import PushMatching

/// The subscriptions and writes of one `bench index` data shape, generated reproducibly.
struct BenchIndexData {
    struct Subscription {
        var path: Path
        var entry: SubscriptionIndex.Entry
    }

    var title: String
    var app = "toto"
    var subscriptions: [Subscription] = []
    /// Labelled sets of 4,096 writes (a power of two), one per measured line.
    var writes: [(label: String, paths: [Path])] = []
    /// Single writes above nodes with very many subscriptions below or at them.
    var fanOuts: [(label: String, path: Path)] = []

    static let sampleCount = 4_096

    /// (a) `/users/{uid}/notifications`, one per distinct 28-character uid.
    static func users(count: Int) -> BenchIndexData {
        var rng = BenchRandom(seed: 11)
        var data = BenchIndexData(title: "shape users: /users/{uid}/notifications, distinct 28-character uids")
        let uids = (0..<count).map { _ in randomID(length: 28, rng: &rng) }
        data.subscriptions = uids.enumerated().map { handle, uid in
            Subscription(path: Path(uncheckedKeys: ["users", uid, "notifications"]), entry: entry(handle))
        }
        func sample(_ label: String, _ keys: (Key, inout BenchRandom) -> [Key]) {
            let paths = (0..<sampleCount).map { _ in
                Path(uncheckedKeys: keys(uids[Int(rng.next() % UInt64(uids.count))], &rng))
            }
            data.writes.append((label, paths))
        }
        sample("depth 1 /config (no such node)") { _, _ in ["config"] }
        sample("depth 2 /users/{uid}") { uid, _ in ["users", uid] }
        sample("depth 3 /users/{uid}/notifications") { uid, _ in ["users", uid, "notifications"] }
        sample("depth 4 /users/{uid}/notifications/{id}") { uid, rng in
            ["users", uid, "notifications", randomID(length: 20, rng: &rng)]
        }
        sample("depth 5 /users/{uid}/notifications/{id}/read") { uid, rng in
            ["users", uid, "notifications", randomID(length: 20, rng: &rng), "read"]
        }
        sample("depth 6 /users/{uid}/notifications/{id}/meta/read") { uid, rng in
            ["users", uid, "notifications", randomID(length: 20, rng: &rng), "meta", "read"]
        }
        data.fanOuts.append(("depth 1 /users (every subscription is below)", Path(uncheckedKeys: ["users"])))
        return data
    }

    /// (b) Per user: `/users/{uid}`, `/users/{uid}/inbox`, `/users/{uid}/profile/settings/notifications`,
    /// `/users/{uid}/devices/{device}/status`, `/presence/{uid}`, `/announcements/{lang}` (20 languages),
    /// and for two of the rooms (a tenth as many rooms as users) `/rooms/{room}/members/{uid}` and
    /// `/rooms/{room}/messages`: ten subscriptions per user, plus 8 at `/config`.
    static func mixed(count: Int) -> BenchIndexData {
        var rng = BenchRandom(seed: 12)
        var data = BenchIndexData(title: "shape mixed: users, rooms, presence, announcements")
        let userCount = max(1, (count - 8) / 10)
        let rooms = (0..<max(1, userCount / 10)).map { _ in randomID(length: 20, rng: &rng) }
        let languages: [Key] = ["en", "fr", "de", "es", "it", "pt", "nl", "sv", "da", "fi", "no", "pl", "cs", "hu", "ro",
                                "el", "tr", "ja", "ko", "zh"]
        var users: [(uid: Key, device: Key)] = []
        var subscriptions: [[Key]] = []
        for _ in 0..<userCount {
            let uid = randomID(length: 28, rng: &rng)
            let device = randomID(length: 16, rng: &rng)
            users.append((uid, device))
            subscriptions += [
                ["users", uid], ["users", uid, "inbox"], ["users", uid, "profile", "settings", "notifications"],
                ["users", uid, "devices", device, "status"], ["presence", uid],
                ["announcements", languages[Int(rng.next() % UInt64(languages.count))]],
            ]
            let first = Int(rng.next() % UInt64(rooms.count))
            let second = (first + 1 + Int(rng.next() % UInt64(max(rooms.count - 1, 1)))) % rooms.count
            for room in [rooms[first], rooms[second]] {
                subscriptions += [["rooms", room, "members", uid], ["rooms", room, "messages"]]
            }
        }
        subscriptions += Array(repeating: ["config"], count: 8)
        data.subscriptions = subscriptions.enumerated().map { handle, keys in
            Subscription(path: Path(uncheckedKeys: keys), entry: entry(handle))
        }
        func sample(_ label: String, _ keys: (_ user: (uid: Key, device: Key), _ room: Key, inout BenchRandom) -> [Key]) {
            let paths = (0..<sampleCount).map { _ in
                let user = users[Int(rng.next() % UInt64(users.count))]
                let room = rooms[Int(rng.next() % UInt64(rooms.count))]
                return Path(uncheckedKeys: keys(user, room, &rng))
            }
            data.writes.append((label, paths))
        }
        sample("depth 1 /config") { _, _, _ in ["config"] }
        sample("depth 2 /users/{uid}") { user, _, _ in ["users", user.uid] }
        sample("depth 2 /rooms/{room}") { _, room, _ in ["rooms", room] }
        sample("depth 3 /rooms/{room}/messages") { _, room, _ in ["rooms", room, "messages"] }
        sample("depth 4 /rooms/{room}/messages/{id}") { _, room, rng in
            ["rooms", room, "messages", randomID(length: 20, rng: &rng)]
        }
        sample("depth 5 /users/{uid}/devices/{device}/status") { user, _, _ in
            ["users", user.uid, "devices", user.device, "status"]
        }
        sample("depth 6 /users/{uid}/profile/settings/notifications/email") { user, _, _ in
            ["users", user.uid, "profile", "settings", "notifications", "email"]
        }
        data.fanOuts.append(("depth 2 /announcements/fr (one node, a twentieth of the users)",
                             Path(uncheckedKeys: ["announcements", "fr"])))
        data.fanOuts.append(("depth 1 /presence (one node per user below)", Path(uncheckedKeys: ["presence"])))
        return data
    }

    private static func entry(_ handle: Int) -> SubscriptionIndex.Entry {
        SubscriptionIndex.Entry(handle: Int64(handle), mode: Mode.allCases[handle % Mode.allCases.count])
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)

    /// A random alphanumeric key (Firebase-like uids are 28 characters, push ids 20).
    static func randomID(length: Int, rng: inout BenchRandom) -> Key {
        let bytes = (0..<length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
        return Key(String(decoding: bytes, as: UTF8.self))
    }
}
