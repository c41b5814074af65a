// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "pushdispatch",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PushCore", targets: ["PushCore"]),
    ],
    targets: [
        // The pure core: JSON, paths, data tree, diffs, payloads. Standard library only.
        .target(
            name: "PushCore",
            linkerSettings: [.linkedLibrary("m", .when(platforms: [.linux]))]
        ),
        .testTarget(name: "PushCoreTests", dependencies: ["PushCore"]),
    ],
    swiftLanguageModes: [.v6]
)
