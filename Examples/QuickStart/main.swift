import Hydra

struct Greeting: Decodable, Sendable {
    let name: String
    let greeting: String
}

@main
struct QuickStart {
    static func main() async throws {
        // The engine: named workers on their own libuv loops, configured from a file
        // (config/hydra.json answers the "hello" api with a dummy response: no network needed).
        let engine = try HydraEngine(configurationFile: "config/hydra.json")
        defer { engine.shutdown() }

        // A local job of our own, next to the built-ins (delay, echo, fail, pick).
        engine.register(localJob: "shout", .inline { call in
            .string((call.input.stringValue ?? "").uppercased())
        })

        // 1. A typed request with the fluent builder.
        let hello = try await engine.request()
            .api("hello").pathVar("name", "gandalf")
            .decoding(Greeting.self)
            .send()
        print("status \(hello.status): \(hello.model.greeting)")

        // 2. A graph: call the api, then feed a field of its answer to our local job.
        let spec = try JobSpec(json: JSONParser.parse("""
            {"type": "serial", "steps": [
              {"type": "remote", "api": "hello", "pathVars": {"name": "frodo"}},
              {"type": "local", "name": "shout", "input": "${prev.body.name}"}]}
            """))
        let result = try await engine.run(spec)
        print(result.state.rawValue, result.result?["results"]?[1] ?? "-")
    }
}
