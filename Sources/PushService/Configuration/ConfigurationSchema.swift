/// The shape of the configuration: which keys exist where, and what type each value has. Used to
/// refuse unknown keys (a typo should not silently mean "default"), to match `PUSHDISPATCH_*`
/// variables to keys, and to convert a variable's text to the key's type.
indirect enum ConfigurationSchema: Sendable {
    /// A value of this kind.
    case leaf(ConfigurationValueKind)
    /// An object with these keys.
    case object([String: ConfigurationSchema])
    /// An object whose keys are names (applications, webhooks), each of this shape.
    case names(ConfigurationSchema)

    static let root: ConfigurationSchema = .object([
        "store": .object(["sqlite": .leaf(.string), "postgres": .leaf(.secret)]),
        "ingest": .object([
            "queueFile": .leaf(.string), "socket": .leaf(.string), "deadLetter": .leaf(.string), "deadLetterMaxSize": .leaf(.size),
            "maxRecordBytes": .leaf(.size), "snapshotAfter": .leaf(.size),
            "socketMode": .leaf(.string), "socketMaxConnections": .leaf(.integer), "socketIdleTimeout": .leaf(.duration),
            "socketMaxBuffered": .leaf(.size), "socketShutdownGrace": .leaf(.duration),
        ]),
        "http": .object(["host": .leaf(.string), "port": .leaf(.integer), "operationsToken": .leaf(.secret), "maxConnections": .leaf(.integer)]),
        "delivery": .object([
            "enabled": .leaf(.boolean),
            "retry": .object([
                "initial": .leaf(.duration), "multiplier": .leaf(.number), "jitter": .leaf(.number), "window": .leaf(.duration),
            ]),
            "timeout": .leaf(.duration),
            "concurrency": .object(["perProvider": .leaf(.integer), "perApp": .leaf(.integer), "perDestination": .leaf(.integer)]),
            "caFile": .leaf(.string),
            "connectionsPerHost": .leaf(.integer), "idleTimeout": .leaf(.duration), "maximumOrigins": .leaf(.integer),
            "pacing": .object([
                "fcm": .leaf(.rate), "hms": .leaf(.rate), "harmonyos": .leaf(.rate), "apns": .leaf(.rate), "webpush": .leaf(.rate), "webhook": .leaf(.rate),
                "retryAfterMinimum": .leaf(.duration), "retryAfterMaximum": .leaf(.duration),
            ]),
        ]),
        "expiry": .object(["interval": .leaf(.duration)]),
        "operations": .object(["history": .object(["maxAge": .leaf(.duration), "maxRows": .leaf(.integer)])]),
        "instance": .object(["name": .leaf(.string), "mode": .leaf(.string), "shutdownTimeout": .leaf(.duration)]),
        "apps": .names(.object([
            "auth": .object([
                "hs256Secret": .leaf(.secret), "jwks": .leaf(.string), "issuer": .leaf(.string), "audience": .leaf(.string),
                "leeway": .leaf(.duration),
            ]),
            "fcm": .object(["serviceAccountFile": .leaf(.string), "endpoint": .leaf(.string)]),
            "hms": .object([
                "clientId": .leaf(.string), "clientSecret": .leaf(.secret), "endpoint": .leaf(.string), "tokenEndpoint": .leaf(.string),
            ]),
            "harmonyos": .object(["serviceAccountFile": .leaf(.string), "endpoint": .leaf(.string)]),
            "apns": .object([
                "teamId": .leaf(.string), "keyId": .leaf(.string), "privateKey": .leaf(.secret), "topic": .leaf(.string),
                "environment": .leaf(.string), "endpoint": .leaf(.string),
            ]),
            "webpush": .object([
                "vapidPrivateKey": .leaf(.secret), "subject": .leaf(.string), "allowedHosts": .leaf(.list),
                "allowPrivateAddresses": .leaf(.boolean),
                "notification": .object([
                    "title": .leaf(.string), "body": .leaf(.string), "navigate": .leaf(.string), "field": .leaf(.string), "mutable": .leaf(.boolean),
                ]),
            ]),
            "webhooks": .names(.object(["url": .leaf(.string), "secret": .leaf(.secret), "pacing": .leaf(.rate)])),
            "pacing": .object([
                "fcm": .leaf(.rate), "hms": .leaf(.rate), "harmonyos": .leaf(.rate), "apns": .leaf(.rate), "webpush": .leaf(.rate), "webhook": .leaf(.rate),
            ]),
            "keys": .leaf(.string),
            "signingKey": .leaf(.string),
            // A file path, or the rules document inline (its keys are the rules', not checked here).
            "rules": .leaf(.string),
            "subscriptions": .object([
                "defaultLifetime": .leaf(.duration), "maxLifetime": .leaf(.duration), "maxWeight": .leaf(.size), "maxPerUser": .leaf(.integer),
            ]),
        ])),
    ])
}

/// The type of a configuration value, as a `PUSHDISPATCH_*` variable's text is converted to it.
enum ConfigurationValueKind: Sendable, Equatable {
    /// Text as it is (paths, URLs, names).
    case string
    /// A decimal integer.
    case integer
    /// `true` or `false`.
    case boolean
    /// A decimal number.
    case number
    /// `500ms`, `10s`, `5m`, `2h`, `7d`.
    case duration
    /// `4096`, `64KiB`, `1MiB`, `1GiB`.
    case size
    /// Text that is never echoed in a message: a value, `env:NAME` or `file:PATH`.
    case secret
    /// A list of strings; a variable writes them separated by commas.
    case list
    /// A rate: `200/s`, `600000/min`, `50000/h`, or `off`.
    case rate
}
