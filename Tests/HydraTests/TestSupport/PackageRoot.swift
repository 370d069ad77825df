import Foundation

/// The package's root folder (where `Package.swift` is), found from this file's
/// place in the tree: tests run the built binaries, the shipped configs and job
/// files, and the scripts in `Tests/Support` from there.
enum PackageRoot {
    /// `Tests/HydraTests/TestSupport/PackageRoot.swift`, four levels below the root.
    static let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// A path below the root.
    static func path(_ relative: String) -> String { url.appendingPathComponent(relative).path }
}
