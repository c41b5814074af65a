/// The shape of the configuration: which keys exist where. Used to refuse unknown keys (a typo
/// should not silently mean "default") and to match `PUSHDISPATCH_*` variables to keys.
indirect enum ConfigurationSchema: Sendable {
    /// A value.
    case leaf
    /// An object with these keys.
    case object([String: ConfigurationSchema])
    /// An object whose keys are names (applications, webhooks), each of this shape.
    case names(ConfigurationSchema)

    static let root: ConfigurationSchema = .object([
        "store": .object(["sqlite": .leaf, "postgres": .leaf]),
        "ingest": .object(["queueFile": .leaf, "socket": .leaf, "deadLetter": .leaf]),
        "http": .object(["host": .leaf, "port": .leaf]),
        "delivery": .object([
            "retry": .object(["initial": .leaf, "multiplier": .leaf, "jitter": .leaf, "window": .leaf]),
            "timeout": .leaf,
            "concurrency": .object(["perProvider": .leaf, "perApp": .leaf]),
            "caFile": .leaf,
        ]),
        "expiry": .object(["interval": .leaf]),
        "apps": .names(.object([
            "auth": .object(["hs256Secret": .leaf, "jwks": .leaf, "issuer": .leaf, "audience": .leaf, "leeway": .leaf]),
            "fcm": .object(["serviceAccountFile": .leaf, "endpoint": .leaf]),
            "hms": .object(["clientId": .leaf, "clientSecret": .leaf, "endpoint": .leaf, "tokenEndpoint": .leaf]),
            "webhooks": .names(.object(["url": .leaf, "secret": .leaf])),
            "keys": .leaf,
            "signingKey": .leaf,
            "subscriptions": .object(["defaultLifetime": .leaf, "maxLifetime": .leaf, "maxWeight": .leaf]),
        ])),
    ])
}
