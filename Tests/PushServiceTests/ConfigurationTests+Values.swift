import Crypto
import Foundation
import PushCore
import PushJSON
import PushJOSE
import PushMatching
import PushIngest
@testable import PushService
import Testing

/// Durations, sizes, read rules, APNs and Web Push settings.
extension ConfigurationTests {
    @Test("durations and sizes", arguments: [
        ("500ms", Duration.milliseconds(500)), ("10s", .seconds(10)), ("5m", .seconds(300)), ("2h", .seconds(7200)), ("7d", .seconds(604_800)),
    ])
    func durations(text: String, expected: Duration) {
        #expect(ConfigurationValues.duration(text) == expected)
    }

    @Test("invalid durations and sizes", arguments: ["", "s", "10", "1.5s", "-1s", "10 s", "10S", "1w"])
    func invalidDurations(text: String) {
        #expect(ConfigurationValues.duration(text) == nil)
    }

    @Test("sizes", arguments: [("4096", Int64(4096)), ("64KiB", 65536), ("1MiB", 1 << 20), ("2GiB", 2 << 30)])
    func sizes(text: String, expected: Int64) {
        #expect(ConfigurationValues.size(text) == expected)
    }

    @Test("read rules: inline or from a file, refused with the rule's location and column; none configured is a warning")
    func rules() throws {
        let inline = try load(#"apps: {toto: {rules: {"rules": {"users": {"$uid": {".read": "auth.uid == $uid"}}}}}}"#)
        #expect(inline.apps["toto"]?.rules?.source == "inline")
        #expect(inline.warnings.isEmpty)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-rules-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("rules.json")
        try Data(#"{"rules": {"rooms": {"$room": {".read": "root.child('members/' + $room).hasChild(auth.uid)"}}}}"#.utf8).write(to: file)
        let fromFile = try load("apps: {toto: {rules: \(file.path)}}")
        #expect(fromFile.apps["toto"]?.readRules.readsData == true)
        try Data(#"{"rules": {"rooms": {"$room": {".read": "auth.uid == $rom"}}}}"#.utf8).write(to: file)
        #expect(error("apps: {toto: {rules: \(file.path)}}").contains(
            "apps.toto.rules (\(file.path)): rules/rooms/$room/.read, column 13: $rom is not captured on the way to this rule ($room is)"))
        // A repeated key is refused with its name, never the last one winning (issue 33:
        // {".read":false,".read":true} passed and granted).
        try Data(#"{"rules": {"secret": {".read": false, ".read": true}}}"#.utf8).write(to: file)
        #expect(error("apps: {toto: {rules: \(file.path)}}").contains(#"repeats the key ".read""#))
        #expect(error(#"apps: {toto: {rules: {"rules": {"secret": {".read": false, ".read": true}}}}}"#).contains("appears twice"))
        try Data("{not json".utf8).write(to: file)
        #expect(error("apps: {toto: {rules: \(file.path)}}").contains("apps.toto.rules: the rules file \"\(file.path)\" is not JSON"))
        #expect(error("apps: {toto: {rules: ./missing.json}}").contains("apps.toto.rules: cannot read the file"))
        #expect(error("apps: {toto: {rules: 12}}").contains("apps.toto.rules: expected a rules file path or the rules object"))
        #expect(error(#"apps: {toto: {rules: {"rules": {".write": "x", ".red": true}}}}"#).contains("apps.toto.rules: rules/.red: unknown rule .red"))
        let none = try load("apps: {toto: {}, other: {rules: {rules: {.read: true}}}}")
        #expect(none.warnings == [
            #"apps.toto.rules: none configured; every authenticated client may read (and subscribe to) every node, as with {"rules": {".read": "auth != null"}}"#
        ])
    }

    @Test("apps.<id>.apns and webpush: defaults by environment, keys parsed, every mistake named without echoing a key")
    func apnsAndWebPush() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-providers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let p8 = P256.Signing.PrivateKey().pemRepresentation
        let vapid = P256.Signing.PrivateKey()
        let environment = Self.environment.merging([
            "APNS_KEY": p8, "OTHER_KEY": P256.Signing.PrivateKey().pemRepresentation, "VAPID_KEY": Base64URL.encodeToString(vapid.rawRepresentation),
        ]) { $1 }
        let good = try load(
            """
            apps:
              toto:
                apns: {teamId: TEAM012345, keyId: KEY0123456, privateKey: env:APNS_KEY, topic: com.example.toto, environment: sandbox}
                webpush: {vapidPrivateKey: env:VAPID_KEY, subject: "mailto:ops@example.com"}
            """, environment)
        let toto = try #require(good.apps["toto"])
        #expect(toto.apns?.endpoint == "https://api.sandbox.push.apple.com" && toto.apns?.environment == .sandbox)
        #expect(toto.webpush?.allowedHosts == nil && toto.webpush?.allowPrivateAddresses == false)
        // A list from a variable: comma-separated.
        let overridden = try load(
            "apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"https://example.com\"}}}",
            environment.merging(["PUSHDISPATCH_APPS_TOTO_WEBPUSH_ALLOWEDHOSTS": "fcm.googleapis.com, *.notify.windows.com"]) { $1 })
        #expect(overridden.apps["toto"]?.webpush?.allowedHosts == ["fcm.googleapis.com", "*.notify.windows.com"])
        // The Declarative Web Push template (issue 34).
        let templated = try load(
            #"apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: "mailto:a@b.c", notification: {title: "{app}", body: "{field}", field: headline, navigate: "https://e.com{path}", mutable: true}}}}"#,
            environment)
        #expect(
            templated.apps["toto"]?.webpush?.notification
                == (try WebPushNotification(title: "{app}", body: "{field}", navigate: "https://e.com{path}", field: "headline", mutable: true)))

        for (text, expected) in [
            ("apps: {toto: {apns: {}}}", "apps.toto.apns.teamId: missing"),
            ("apps: {toto: {apns: {teamId: team, keyId: KEY0123456, privateKey: env:APNS_KEY, topic: a.b}}}", "apps.toto.apns.teamId: expected Apple's 10 upper-case letters and digits"),
            ("apps: {toto: {apns: {teamId: TEAM012345, keyId: KEY0123456, privateKey: not-a-key, topic: a.b}}}", "apps.toto.apns.privateKey: not a PEM P-256 private key"),
            ("apps: {toto: {apns: {teamId: TEAM012345, keyId: KEY0123456, privateKey: env:APNS_KEY, topic: \"a b\"}}}", "apps.toto.apns.topic: expected a bundle id"),
            ("apps: {toto: {apns: {teamId: TEAM012345, keyId: KEY0123456, privateKey: env:APNS_KEY, topic: a.b, environment: development}}}", "apps.toto.apns.environment: expected production or sandbox"),
            ("apps: {toto: {apns: {teamId: TEAM012345, keyId: KEY0123456, privateKey: env:APNS_KEY, topic: a.b, endpoint: apple}}}", "apps.toto.apns.endpoint: expected an http(s) URL"),
            ("apps: {toto: {webpush: {}}}", "apps.toto.webpush.vapidPrivateKey: missing"),
            ("apps: {toto: {webpush: {vapidPrivateKey: secret-value-1234, subject: \"mailto:a@b.c\"}}}", "apps.toto.webpush.vapidPrivateKey: expected a PEM P-256 private key"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"admin@example.com\"}}}", "apps.toto.webpush.subject: expected a mailto: or https: URI"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto: <a@b.c>\"}}}", "apps.toto.webpush.subject: expected a mailto: or https: URI without spaces"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto:a@b.c\", allowedHosts: [\"https://fcm.googleapis.com\"]}}}", "apps.toto.webpush.allowedHosts: \"https://fcm.googleapis.com\": expected host names"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto:a@b.c\", allowedHosts: []}}}", "apps.toto.webpush.allowedHosts: empty"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto:a@b.c\", allowedHosts: fcm.googleapis.com}}}", "apps.toto.webpush.allowedHosts: expected a list of strings"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto:a@b.c\", allowPrivateAddresses: sometimes}}}", "apps.toto.webpush.allowPrivateAddresses: expected true or false"),
            ("apps: {toto: {webpush: {vapidKey: x}}}", "apps.toto.webpush.vapidKey: unknown key"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto:a@b.c\", notification: {body: x}}}}", "apps.toto.webpush.notification.title: missing"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto:a@b.c\", notification: {title: x}}}}", "apps.toto.webpush.notification.navigate: missing; the https:// page"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto:a@b.c\", notification: {title: \"{user}\", navigate: \"https://e.com\"}}}}", "apps.toto.webpush.notification.title: {user} is not a name"),
            ("apps: {toto: {webpush: {vapidPrivateKey: env:VAPID_KEY, subject: \"mailto:a@b.c\", notification: {title: x, navigate: \"http://e.com\"}}}}", "apps.toto.webpush.notification.navigate: expected an https:// URL"),
            (
                "apps: {a: {apns: {teamId: TEAM012345, keyId: KEY0123456, privateKey: env:APNS_KEY, topic: a.b}}, b: {apns: {teamId: TEAM012345, keyId: KEY0123456, privateKey: env:OTHER_KEY, topic: b.c}}}",
                "apps.b.apns.privateKey: key KEY0123456 of team TEAM012345 is another key in apps.a.apns"
            ),
        ] {
            let message = error(text, environment)
            #expect(message.contains(expected), "\(text): \(message)")
            #expect(!message.contains("secret-value-1234") && !message.contains(p8.dropFirst(30).prefix(20)), "\(message)")
        }
    }
}
