// swift-tools-version:6.0
import Foundation
import PackageDescription

// The libFuzzer entry points (issue 33): one executable per fuzz target, each calling its body in
// the main package's PushFuzz library. Built only by scripts/fuzz.sh, with
// `-sanitize=fuzzer,address -parse-as-library`; a plain `swift build` here cannot link (the
// entry points call libFuzzer's driver). The main package's build never sees this one.

/// The fuzz targets: `Targets/<name>/`, the executable `fuzz-<name>`, the corpus
/// `corpus/<name>/` (the same list as `FuzzTarget.all` in PushFuzz).
let names = ["json", "record", "rules", "jose", "bearer", "subscription", "webpush", "provider", "config"]

/// A package given by path is known by its folder's name, in lower case (`pushdispatch`, or the
/// worktree's name).
let mainPackage = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent()

let package = Package(
    name: "pushdispatch-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: mainPackage.path)],
    targets: [.target(name: "FuzzDriver", path: "Driver")]
        + names.map { name in
            .executableTarget(
                name: "fuzz-\(name)",
                dependencies: ["FuzzDriver", .product(name: "PushFuzz", package: mainPackage.lastPathComponent.lowercased())],
                path: "Targets/\(name)"
            )
        },
    swiftLanguageModes: [.v6]
)
