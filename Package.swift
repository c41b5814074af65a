// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "pushdispatch",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushdispatch", targets: ["pushdispatch"]),
        .library(name: "PushCore", targets: ["PushCore"]),
        .library(name: "PushJOSE", targets: ["PushJOSE"]),
        .library(name: "PushStore", targets: ["PushStore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // The pure core: JSON, paths, data tree, diffs, payloads, subscriptions and their
        // index, store protocols. Standard library only.
        .target(
            name: "PushCore",
            linkerSettings: [.linkedLibrary("m", .when(platforms: [.linux]))]
        ),
        // JWS / JWE / JWK on swift-crypto; v2 sealers; bearer tokens; subscription ids.
        .target(
            name: "PushJOSE",
            dependencies: [
                "PushCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // Stores: SQLite (GRDB).
        .target(
            name: "PushStore",
            dependencies: ["PushCore", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .executableTarget(
            name: "pushdispatch",
            dependencies: [
                "PushCore",
                "PushJOSE",
                "PushStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore"]),
        .testTarget(
            name: "PushJOSETests",
            dependencies: ["PushJOSE", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(name: "PushStoreTests", dependencies: ["PushStore", "PushJOSE"]),
        .testTarget(name: "EndToEndTests", dependencies: ["PushCore", "PushJOSE"]),
    ],
    swiftLanguageModes: [.v6]
)
