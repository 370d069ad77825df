import Foundation

/// Where the executables under test are: the folder this test bundle was
/// built into (so `make test-tsan`, building into `.build-tsan`, runs the
/// sanitized server), or `HYDRA_PRODUCTS` when set.
enum BuiltProducts {
    static let folder: URL = {
        if let given = ProcessInfo.processInfo.environment["HYDRA_PRODUCTS"] { return URL(fileURLWithPath: given) }
        // The test bundle lives in the products folder (…/debug/HydraPackageTests.xctest).
        let bundle = URL(fileURLWithPath: CommandLine.arguments.first { $0.hasSuffix(".xctest") } ?? "")
        if bundle.pathExtension == "xctest" { return bundle.deletingLastPathComponent() }
        return PackageRoot.url.appendingPathComponent(".build/debug")
    }()

    static func url(_ name: String) -> URL { folder.appendingPathComponent(name) }

    /// True under `make test-tsan` / `make test-asan`: memory and time figures
    /// mean nothing there (quarantined frees, a tenfold slowdown).
    static let sanitized: Bool = {
        let environment = ProcessInfo.processInfo.environment
        return environment["TSAN_OPTIONS"] != nil || environment["ASAN_OPTIONS"] != nil
    }()
}
