// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "pushdispatch",
    // iOS 18 with macOS 15: PushJOSE (and the server's PushContracts) use
    // `Synchronization.Mutex`, which both require; the app library PushDispatchClient builds for both.
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "pushdispatch", targets: ["pushdispatch"]),
        .executable(name: "pushdispatch-bench", targets: ["pushdispatch-bench"]),
        .library(name: "PushJSON", targets: ["PushJSON"]),
        .library(name: "PushCore", targets: ["PushCore"]),
        .library(name: "PushMatching", targets: ["PushMatching"]),
        .library(name: "PushContracts", targets: ["PushContracts"]),
        .library(name: "PushJOSE", targets: ["PushJOSE"]),
        .library(name: "PushStore", targets: ["PushStore"]),
        .library(name: "PushAPI", targets: ["PushAPI"]),
        .library(name: "PushService", targets: ["PushService"]),
        .library(name: "PushEngine", targets: ["PushEngine"]),
        .library(name: "PushIngest", targets: ["PushIngest"]),
        .library(name: "PushHTTP", targets: ["PushHTTP"]),
        .library(name: "PushDelivery", targets: ["PushDelivery"]),
        // The fuzz bodies, for the libFuzzer package under Fuzz/ (docs/testing.md).
        .library(name: "PushFuzz", targets: ["PushFuzz"]),
        // For apps: subscribe and read notifications (Linux and Apple platforms).
        .library(name: "PushDispatchClient", targets: ["PushDispatchClient"]),
        .executable(name: "pushdispatch-client-sample", targets: ["pushdispatch-client-sample"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // OpenTelemetry traces exported over OTLP/HTTP only: the gRPC exporter's packages
        // (grpc-swift and its transport) would add minutes to every clean build.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // JSON as SPEC §7.1 has it: key order and number text kept, shortest doubles, bounded
        // parsing. Standard library only.
        .target(
            name: "PushJSON",
            linkerSettings: [.linkedLibrary("m", .when(platforms: [.linux]))]
        ),
        // What the service and apps share: paths and key order, diffs and events, payload formats
        // (v1, the v2 shell and its sealers), the subscription model and device contexts, the
        // clock. Standard library only.
        .target(
            name: "PushCore",
            dependencies: ["PushJSON"]
        ),
        // The service's domain: what a write does and who it concerns. Data trees and their
        // writes, change records, subscription requests checked, the subscription index that
        // matches writes, read rules. Standard library only.
        .target(
            name: "PushMatching",
            dependencies: ["PushCore", "PushJSON"]
        ),
        // What the server's rooms agree on: the store protocols that PushStore implements and
        // the engine, the sources, delivery and the API call; what crosses them (outbox entries,
        // inbox records, leases, checkpoints, dead letters); the intake queue from the sources to
        // the engine. Standard library only.
        .target(
            name: "PushContracts",
            dependencies: ["PushCore", "PushJSON", "PushMatching"]
        ),
        // JWS / JWE / JWK on swift-crypto; v2 sealers; bearer tokens; subscription ids.
        .target(
            name: "PushJOSE",
            dependencies: [
                "PushCore", "PushJSON",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // SQLite's process-wide settings (`sqlite3_config` is variadic: Swift cannot call it).
        .systemLibrary(name: "CSQLiteConfig", path: "Sources/CSQLiteConfig", providers: [.apt(["libsqlite3-dev"])]),
        // Stores: SQLite (GRDB), PostgreSQL (postgres-nio).
        .target(
            name: "PushStore",
            dependencies: [
                "PushCore", "PushJSON", "PushContracts", "PushJOSE", "CSQLiteConfig",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // The spans of records and delivery attempts, over swift-distributed-tracing's API (the
        // service gives it OpenTelemetry's tracer when tracing is on).
        .target(
            name: "PushTracing",
            dependencies: [
                .product(name: "Tracing", package: "swift-distributed-tracing")
            ]
        ),
        // The record engine: lines checked, records through the pipeline, notifications built,
        // batches committed; trees loaded, the subscription index kept in step with the store,
        // expiry; the several-instance intake, leases and owners. Over the store protocols
        // (PushContracts) only.
        .target(
            name: "PushEngine",
            dependencies: [
                "PushCore", "PushJSON", "PushMatching", "PushContracts", "PushTracing",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Change-record sources: the queue-file tailer, the Unix socket, the dead-letter file.
        .target(
            name: "PushIngest",
            dependencies: [
                "PushCore", "PushContracts",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The HTTP client of delivery: HTTP/2 on swift-nio-http2 (the connection pool and each
        // connection's streams as state machines), the HTTP/1.1 fall-back on
        // async-http-client, request targets, the public-address policy.
        .target(
            name: "PushHTTP",
            dependencies: [
                "PushCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        // Delivery: provider answers, messages, access tokens, senders and the dispatcher.
        .target(
            name: "PushDelivery",
            dependencies: [
                "PushCore", "PushJSON", "PushContracts", "PushJOSE", "PushHTTP", "PushTracing",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The REST API (Hummingbird).
        .target(
            name: "PushAPI",
            dependencies: [
                "PushCore", "PushJSON", "PushMatching", "PushContracts", "PushJOSE",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ]
        ),
        // The composition root: configuration → services → one ServiceGroup.
        .target(
            name: "PushService",
            dependencies: [
                "PushCore", "PushJSON", "PushMatching", "PushContracts", "PushJOSE", "PushStore", "PushAPI", "PushEngine", "PushIngest", "PushDelivery", "PushHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                "PushTracing",
                .product(name: "OTel", package: "swift-otel"),
            ]
        ),
        // The fake providers (Google OAuth, FCM, HMS, APNs, Web Push, webhooks) replaying the
        // recorded answers of `fixtures/`: what the demo runs against, and the tests.
        .target(
            name: "PushFakes",
            dependencies: [
                "PushCore", "PushJSON", "PushJOSE",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // What only tests (and the benchmarks) use: a manual clock, the seeded mutator, a
        // throwaway PostgreSQL, nginx and nghttpd, child processes that die with the tests,
        // Python references installed on demand. Never linked by the product.
        .target(
            name: "PushTestSupport",
            dependencies: ["PushJSON", "PushCore", "PushFakes"]
        ),
        // The demo: the service with the fake providers (`pushdispatch demo`).
        .target(
            name: "PushDemo",
            dependencies: [
                "PushCore", "PushJSON", "PushJOSE", "PushService", "PushFakes",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The executable: argument parsing and calls, nothing else.
        .executableTarget(
            name: "pushdispatch",
            dependencies: [
                "PushCore", "PushJSON", "PushMatching", "PushContracts", "PushJOSE", "PushService", "PushDemo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The benchmarks (`pushdispatch-bench`): hot paths, ingestion, the socket, restarts,
        // deliveries, each beside its reference in one run (docs/benchmarks.md).
        .executableTarget(
            name: "pushdispatch-bench",
            dependencies: [
                "PushCore", "PushJSON", "PushMatching", "PushContracts", "PushJOSE", "PushStore", "PushEngine", "PushIngest", "PushDelivery", "PushHTTP", "PushService", "PushFakes", "PushTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Sources/PushBench"
        ),
        // The fuzz bodies (issue 33): one function per parser that takes outside input, which
        // asserts its invariants by trapping. The libFuzzer entry points are a package of their
        // own (Fuzz/, built with sanitizers by scripts/fuzz.sh); the corpora are replayed
        // through the same bodies by PushFuzzTests. Never linked by the product.
        .target(
            name: "PushFuzz",
            dependencies: ["PushJSON", "PushCore", "PushMatching", "PushContracts", "PushEngine", "PushJOSE", "PushHTTP", "PushDelivery", "PushService"]
        ),
        // The library for apps: nodes and subscriptions over the REST API (URLSession), the
        // device key, notifications read and checked. PushJSON, PushCore, PushJOSE and
        // swift-crypto only: no NIO, no server module, so that it builds for Apple platforms too.
        .target(
            name: "PushDispatchClient",
            dependencies: ["PushJSON", "PushCore", "PushJOSE", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // A sample app of the library: subscribes, then prints the notifications it reads.
        .executableTarget(
            name: "pushdispatch-client-sample",
            dependencies: ["PushJSON", "PushDispatchClient", "PushCore", "PushJOSE", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Sources/PushDispatchClientSample"
        ),
        // The README's "For app developers" example as an app would hold it: it imports only
        // PushDispatchClient and Foundation, and is built with everything else (never run: it
        // would reach push.example.com). ReadmeExampleTests checks it is the README's text.
        .executableTarget(
            name: "pushdispatch-readme-app",
            dependencies: ["PushDispatchClient"],
            path: "Examples/ReadmeApp"
        ),
        .testTarget(
            name: "PushDispatchClientTests",
            dependencies: [
                "PushJSON", "PushDispatchClient", "PushCore", "PushMatching", "PushJOSE", "PushDelivery", "PushTestSupport", "PushFakes",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(name: "PushJSONTests", dependencies: ["PushJSON", "PushTestSupport"]),
        .testTarget(name: "PushMatchingTests", dependencies: ["PushMatching", "PushCore", "PushJSON", "PushTestSupport"]),
        .testTarget(name: "PushContractsTests", dependencies: ["PushContracts", "PushCore"]),
        .testTarget(name: "PushFuzzTests", dependencies: ["PushFuzz"]),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore", "PushJSON", "PushContracts", "PushTestSupport"]),
        .testTarget(
            name: "PushJOSETests",
            dependencies: [
                "PushCore", "PushJSON", "PushMatching", "PushJOSE", "PushTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "PushAPITests",
            dependencies: [
                "PushCore", "PushJSON", "PushMatching", "PushContracts", "PushAPI", "PushStore", "PushJOSE", "PushTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "PushDeliveryTests",
            dependencies: [
                "PushCore", "PushJSON", "PushContracts", "PushDelivery", "PushHTTP", "PushTestSupport", "PushFakes", "PushStore", "PushJOSE",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .testTarget(
            name: "PushHTTPTests",
            dependencies: [
                "PushCore", "PushHTTP", "PushTestSupport", "PushFakes",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ]
        ),
        .testTarget(
            name: "PushStoreTests",
            dependencies: ["PushCore", "PushContracts", "PushStore", "PushJOSE", "PushTestSupport", "PushFakes", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "PushIngestTests", dependencies: ["PushCore", "PushJSON", "PushContracts", "PushIngest", "PushTestSupport", "PushFakes", .product(name: "NIOPosix", package: "swift-nio")]),
        .testTarget(
            name: "PushEngineTests",
            dependencies: ["PushCore", "PushJSON", "PushMatching", "PushContracts", "PushEngine", "PushStore", "PushJOSE", "PushTestSupport", "PushTracing", .product(name: "Logging", package: "swift-log"), .product(name: "Tracing", package: "swift-distributed-tracing")]
        ),
        .testTarget(
            name: "PushServiceTests",
            dependencies: [
                "PushAPI", "PushCore", "PushJSON", "PushContracts", "PushService", "PushEngine", "PushStore", "PushIngest", "PushJOSE", "PushTestSupport", "PushFakes",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "PushCore", "PushJSON", "PushMatching", "PushJOSE", "PushStore", "PushTestSupport", "PushFakes", "PushDispatchClient",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
