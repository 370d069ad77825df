#if HYDRA_FUZZ
import CLibFuzzer
import Foundation

/// The program's entry under `make fuzz` (built with `-sanitize=fuzzer,address
/// -DHYDRA_FUZZ`): SwiftPM links an executable's entry as `<module>_main`, so
/// this is it, and it hands over to libFuzzer's driver. The target comes from
/// `HYDRA_FUZZ_TARGET` (json, spec, config, rpc).
@_cdecl("HydraFuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    _ = FuzzEntry.target
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
        FuzzEntry.target.run(UnsafeBufferPointer(start: data, count: size))
        return 0
    }
}

enum FuzzEntry {
    static let target: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["HYDRA_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            fatalError("HYDRA_FUZZ_TARGET must be one of \(FuzzTarget.allCases.map(\.rawValue))")
        }
        return target
    }()
}
#else
import Foundation

/// Without the fuzzer: `hydra-fuzz TARGET FILE|FOLDER...` runs saved inputs
/// (the seed corpora, findings) through a target, so `make test` keeps every
/// one of them passing.
@main
struct FuzzReplay {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(Data("usage: hydra-fuzz json|spec|config|rpc FILE|FOLDER...\n".utf8))
            exit(2)
        }
        var count = 0
        for path in arguments.dropFirst() {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                FileHandle.standardError.write(Data("hydra-fuzz: \(path): no such file\n".utf8))
                exit(2)
            }
            let files = isFolder.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 }
                : [path]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                [UInt8](data).withUnsafeBufferPointer { target.run($0) }
                count += 1
            }
        }
        print("hydra-fuzz \(name): \(count) inputs passed")
    }
}
#endif
