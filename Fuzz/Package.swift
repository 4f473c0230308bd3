// swift-tools-version:6.0
// libFuzzer targets for tidings (`make fuzz`, README "Fuzzing"). A separate package so the
// root `swift build` / `swift test` never see the sanitizer flags; build it only through
// Fuzz/run.sh, which passes `-sanitize=fuzzer,address -parse-as-library`.
import Foundation
import PackageDescription

// `.package(path: "..")` is identified by the directory name of the checkout (wt-fuzz, tidings, …).
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent()
let rootPackage = root.lastPathComponent

let package = Package(
    name: "tidings-fuzz",
    platforms: [.macOS(.v14)],
    dependencies: [.package(path: root.path)],
    targets: [
        /// One binary for every fuzz target (FUZZ_TARGET=NAME picks one): one link of a large
        /// sanitized executable instead of eight.
        .executableTarget(
            name: "TidingsFuzz",
            dependencies: [.product(name: "TidingsFuzzTargets", package: rootPackage)]
        ),
    ]
)
