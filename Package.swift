// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "pushdispatch",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushdispatch", targets: ["pushdispatch"]),
        .library(name: "PushCore", targets: ["PushCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // The pure core: JSON, paths, data tree, diffs, payloads. Standard library only.
        .target(
            name: "PushCore",
            linkerSettings: [.linkedLibrary("m", .when(platforms: [.linux]))]
        ),
        .executableTarget(
            name: "pushdispatch",
            dependencies: [
                "PushCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore"]),
        .testTarget(name: "EndToEndTests", dependencies: ["PushCore"]),
    ],
    swiftLanguageModes: [.v6]
)
