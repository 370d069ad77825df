import Foundation
import Hydra

/// Fetches `url` through a repository in `state` and returns its bytes. A
/// long-lived engine serves later fetches from memory or disk while fresh;
/// this one, made per call, keeps its index in memory and fetches again
/// (give `HydraEngine(resourceIndex:)` a `SQLiteStore` to keep it).
func cachedData(from url: String, state: String) async throws -> Data? {
    let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
    defer { engine.shutdown() }
    var options = ResourceSpec(RemoteSpec(url: url))
    options.maxAgeSec = 3600
    let result = try await engine.fetchResource(url, options: options)  // "source": network, memory or disk
    print(result["source"] ?? "", result["bytes"] ?? "")
    _ = try await engine.purgeResources(maxBytes: 100 << 20)            // least recently used first
    return try engine.resourceData(url)                                  // from the repository only
}
