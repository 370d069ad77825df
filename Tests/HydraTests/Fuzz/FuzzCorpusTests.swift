import Foundation
import Testing

/// The fuzzers' seed corpora and saved findings stay passing: each target's
/// folder runs through `hydra-fuzz` built without the fuzzer.
@Suite(.ownThreads) struct FuzzCorpusTests {
    @Test(arguments: ["json", "spec", "config", "rpc"])
    func savedInputsPass(target: String) throws {
        let process = ChildProcess()
        process.executableURL = BuiltProducts.url("hydra-fuzz")
        let corpus = PackageRoot.url.appendingPathComponent("Fuzz/corpus/\(target)").path
        process.arguments = [target, corpus]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        #expect(text.contains("inputs passed"))
        #expect(!text.contains(": 0 inputs"))
    }
}
