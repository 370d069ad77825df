import Foundation
import OrderedCollections
import Testing

@testable import Hydra

@Suite(.ownThreads) struct SpecTests {
    func error(_ text: String) -> String? {
        do {
            _ = try spec(text)
            return nil
        } catch let error as ValidationError {
            return error.description
        } catch {
            return "\(error)"
        }
    }

    @Test func errorsNameTheFieldPath() {
        #expect(error(#"{"type":"serial","steps":[{"type":"local","name":"echo"},{"type":"remote","url":5}]}"#)
                == "steps[1].url: expected string, got number")
        #expect(error(#"{"type":"remote"}"#) == "url: required (or server+endpoint, or api)")
        #expect(error(#"{"type":"nope"}"#)?.hasPrefix("type: unknown type 'nope'") == true)
        #expect(error(#"{"type":"local","name":"echo","inptu":1}"#) == "inptu: unknown key")
        #expect(error(#"{"type":"remote","url":"http://x","api":"a"}"#)?.hasPrefix("url: give exactly one address") == true)
        #expect(error(#"{"type":"concurrent","steps":[{"type":"local","name":"echo","id":"a"},{"type":"local","name":"echo","id":"a"}]}"#)
                == "steps[1].id: duplicate id 'a'")
        // Nested groups share their graph's results: an id is unique across all levels.
        #expect(error(#"{"type":"serial","steps":[{"type":"local","name":"echo","id":"a"},{"type":"concurrent","steps":[{"type":"local","name":"echo","id":"b"},{"type":"local","name":"echo","id":"a"}]}]}"#)
                == "steps[1].steps[1].id: duplicate id 'a'")
        #expect(error(#"{"type":"serial","steps":[{"type":"serial","id":"g","steps":[{"type":"local","name":"echo","id":"x"}]},{"type":"local","name":"echo","id":"y"}]}"#) == nil)
        // A whole number past Int's range is out of range, not "not an integer".
        #expect(error(#"{"type":"local","name":"echo","timeoutMs":1e30}"#)?.hasPrefix("timeoutMs: must be at most") == true)
        #expect(error(#"{"type":"local","name":"echo","timeoutMs":99999999999999999999}"#)?.hasPrefix("timeoutMs: must be at most") == true)
        #expect(error(#"{"type":"local","name":"echo","timeoutMs":1.5}"#) == "timeoutMs: expected integer, got number")
        // Within range but not read exactly with an exponent: said so (it read "must be at most 9223372036854775807").
        #expect(error(#"{"type":"local","name":"echo","timeoutMs":1e18}"#) == "timeoutMs: " + JSONValue.inexactWholeNumberReason)
        #expect(error(#"{"type":"local","name":"echo","timeoutMs":1e15}"#) == nil)
    }

    @Test func unknownKeysAreFoundInLargeObjectsToo() throws {
        // Past 64 members the reader tracks what it read differently: both paths refuse a typo.
        var members = (0..<70).map { #""k\#($0)":\#($0)"# }
        var reader = try FieldReader(try JSONParser.parse("{" + members.joined(separator: ",") + "}"), path: "x")
        for i in 0..<70 where i != 3 && i != 66 { _ = reader.value("k\(i)") }
        #expect(throws: ValidationError(path: "x.k3", "unknown key")) { try reader.rejectUnknownKeys() }
        _ = reader.value("k3")
        #expect(throws: ValidationError(path: "x.k66", "unknown key")) { try reader.rejectUnknownKeys() }
        _ = reader.value("k66")
        try reader.rejectUnknownKeys()
        // A key asked for but absent does not count as read.
        members = [#""a":1"#, #""b":2"#]
        reader = try FieldReader(try JSONParser.parse("{" + members.joined(separator: ",") + "}"), path: "")
        _ = reader.value("a")
        _ = reader.value("c")
        #expect(throws: ValidationError(path: "b", "unknown key")) { try reader.rejectUnknownKeys() }
    }

    /// The reader skips names of a length no member has: every length is
    /// still found, long names (63 bytes and more share one mark) and
    /// multi-byte ones included, and an absent name of a present length is absent.
    @Test func membersAreFoundWhateverTheirLength() throws {
        let names = ["a", "ab", "é", "名前", String(repeating: "k", count: 62), String(repeating: "l", count: 63),
                     String(repeating: "m", count: 64), String(repeating: "n", count: 200)]
        let object = JSONValue.object(OrderedDictionary(uniqueKeysWithValues: names.enumerated().map { ($1, JSONValue.int($0)) }))
        var reader = try FieldReader(object, path: "")
        #expect(reader.value("b") == nil && reader.value("x" + String(repeating: "m", count: 63)) == nil)
        #expect(reader.value(String(repeating: "o", count: 200)) == nil && reader.value("éé") == nil)
        for (i, name) in names.enumerated() { #expect(reader.value(name) == .int(i), "\(name.utf8.count) bytes") }
        try reader.rejectUnknownKeys()
    }

    @Test func outOfRangeNumbersAreFoundByPath() throws {
        #expect(try JSONParser.parse(#"{"a":[1,{"b":2.5}],"c":"1e400"}"#).firstNonFiniteNumber() == nil)
        #expect(try JSONParser.parse(#"{"a":[1,{"b":1e400}],"c":-1e400}"#).firstNonFiniteNumber(under: "job") == "job.a[1].b")
        #expect(try JSONParser.parse(#"[0,[1,-1e999]]"#).firstNonFiniteNumber() == "[1][1]")
        #expect(try JSONParser.parse("1e400").firstNonFiniteNumber(under: "x") == "x")
    }

    @Test func summariesNeverShowCredentials() throws {
        func url(_ text: String) throws -> String? {
            try spec(#"{"type":"remote","url":"\#(text)"}"#).summary["url"]?.stringValue
        }
        #expect(try url("https://user:pw@api.example.com/x") == "https://***@api.example.com/x")
        #expect(try url("http://token@h:8080") == "http://***@h:8080")
        #expect(try url("https://api.example.com/users/@me") == "https://api.example.com/users/@me")
        #expect(try url("http://h/x?mail=a@b") == "http://h/x?mail=a@b")
        #expect(try url("http://h/x") == "http://h/x")
    }

    @Test func specRoundTripsThroughJSON() throws {
        let text = #"{"type":"serial","stopWhenFailed":true,"steps":[{"type":"remote","id":"a","method":"POST","url":"http://h/x","query":{"q":"1"},"body":{"k":[1]},"retry":{"maxAttempts":3,"backoffMs":10,"maxBackoffMs":100}},{"type":"local","name":"echo","input":"${prev.body}"}]}"#
        let parsed = try spec(text)
        let again = try JobSpec(json: parsed.json)
        #expect(JSONWriter.string(again.json) == JSONWriter.string(parsed.json))
    }

    @Test func configurationRejectsUnknownKeysWithPath() throws {
        #expect(throws: ValidationError(path: "rpc.lisen", "unknown key")) {
            _ = try Configuration(json: try JSONParser.parse(#"{"rpc":{"lisen":"x"}}"#))
        }
        #expect(throws: ValidationError(path: "workers[0].kind", "expected remote or local")) {
            _ = try Configuration(json: try JSONParser.parse(#"{"workers":[{"name":"w","kind":"x"}]}"#))
        }
        #expect(throws: ValidationError(path: "apis.a.server", "unknown server 's'")) {
            _ = try Configuration(json: try JSONParser.parse(#"{"apis":{"a":{"server":"s","endpoint":"/"}}}"#))
        }
    }

    /// Values that would start a server that cannot work, or silently mean
    /// something else, stop the load naming the key.
    @Test(arguments: [
        (#"{"workers":[{"name":"","kind":"local"}]}"#, "workers[0].name"),
        (#"{"workers":[{"name":"w","kind":"remote","maxConnections":1000001}]}"#, "workers[0].maxConnections"),
        (#"{"workers":[{"name":"w","kind":"remote","maxActive":9223372036854775807}]}"#, "workers[0].maxActive"),
        (#"{"rpc":{"maxConnections":1000000000000}}"#, "rpc.maxConnections"),
        (#"{"rpc":{"unixSocket":""}}"#, "rpc.unixSocket"),
        (#"{"state":{"path":""}}"#, "state.path"),
        (#"{"servers":{"s":"http://h"},"apis":{"a":{"server":"s","endpoint":"/","method":""}}}"#, "apis.a.method"),
        (#"{"servers":{"s":"http://h"},"dummy":{"responses":[{"server":"s","endpoint":"/","method":"GE T"}]}}"#, "dummy.responses[0].method"),
        (#"{"allowEnv":[""]}"#, "allowEnv[0]"),
        (#"{"allowEnv":["HOME","HOME"]}"#, "allowEnv[1]"),
        // Names a shell could not set, and the server's own secrets (a job would print them).
        (#"{"allowEnv":["x y"]}"#, "allowEnv[0]"), (#"{"allowEnv":["*"]}"#, "allowEnv[0]"),
        (#"{"allowEnv":["1A"]}"#, "allowEnv[0]"), (#"{"allowEnv":["A\u0000B"]}"#, "allowEnv[0]"),
        (#"{"allowEnv":["HYDRA_SHARED_KEY"]}"#, "allowEnv[0]"), (#"{"allowEnv":["HOME","HYDRA_RPC_SECRET"]}"#, "allowEnv[1]"),
        // A NUL cuts a path short where the system reads it; an escape sequence in a name rewrites terminals.
        (#"{"rpc":{"unixSocket":"/tmp/a\u0000b.sock"}}"#, "rpc.unixSocket"),
        ("{\"rpc\":{\"unixSocket\":\"/tmp/\(String(repeating: "s", count: 110))\"}}", "rpc.unixSocket"),
        (#"{"state":{"path":"a\u0000b"}}"#, "state.path"),
        (#"{"jobs":{"path":"j\u0007"}}"#, "jobs.path"),
        (#"{"workers":[{"name":"l\n\u001b[31mX","kind":"local"}]}"#, "workers[0].name"),
        (#"{"rpc":{"maxSubscriptions":1000000000000}}"#, "rpc.maxSubscriptions"),
        (#"{"rpc":{"listen":"127.0.0.1:+7400"}}"#, "rpc.listen"),
        (#"{"servers":{"s":"http://user:pw@host:99999/"}}"#, "servers.s"),
        (#"{"state":{"minFreeBytes":-1}}"#, "state.minFreeBytes"),
        ("{\"dummy\":{\"responses\":[\(Array(repeating: #"{"endpoint":"/x","status":200}"#, count: 10_001).joined(separator: ","))]}}",
         "dummy.responses"),
        // A base URL with a query or fragment lost the endpoints appended to it; an endpoint that is a URL of its own.
        (#"{"servers":{"s":"http://h/q?a=1"}}"#, "servers.s"), (#"{"servers":{"s":{"url":"http://h/pre#frag"}}}"#, "servers.s.url"),
        (#"{"servers":{"s":5}}"#, "servers.s"),
        (#"{"servers":{"s":"http://h"},"apis":{"a":{"server":"s","endpoint":"http://other/x"}}}"#, "apis.a.endpoint"),
        (#"{"dummy":{"responses":[{"endpoint":"https://other/x"}]}}"#, "dummy.responses[0].endpoint"),
        (#"{"dummy":{"responses":[{"endpoint":"/x","delayMs":1000000000000}]}}"#, "dummy.responses[0].delayMs"),
        // Only ${env.NAME} is read in the auth section: another reference was sent as it is.
        (#"{"auth":{"ci":{"type":"bearer","token":"${input.x}"}}}"#, "auth.ci.token"),
        (#"{"auth":{"ci":{"type":"bearer","token":"a${env.HOME}${steps.x}"}}}"#, "auth.ci.token"),
    ])
    func configurationRejectsValuesThatCannotWork(text: String, path: String) throws {
        do {
            _ = try Configuration(json: try JSONParser.parse(text))
            Issue.record("accepted \(text)")
        } catch let error as ValidationError {
            #expect(error.path == path, "\(error)")
        }
    }

    @Test func theContractsExampleConfigurationLoads() throws {
        // config.md's example, its comments taken out: every key, and the defaults.
        let example = """
        {
          "rpc": {
            "listen": "127.0.0.1:7400",
            "unixSocket": null,
            "secret": null,
            "allowInsecure": false,
            "maxMessageBytes": 1048576,
            "maxOutboundBytes": 8388608,
            "maxConnections": 1024
          },
          "state": {
            "path": "var",
            "sync": "normal"
          },
          "workers": [
            {"name": "rest",  "kind": "remote", "maxConnections": 64, "maxHostConnections": 16, "maxActive": 256},
            {"name": "local", "kind": "local",  "threads": 2}
          ],
          "servers": {"apisvr": "http://127.0.0.1:8080"},
          "apis": {
            "hello": {"server": "apisvr", "endpoint": "/v1/hello/:name", "method": "GET",
                      "headers": {}, "dogma": "json", "cacheTTL": 3600,
                      "invalidates": ["list"], "cacheIgnoreQuery": false,
                      "retry": {"maxAttempts": 3, "backoffMs": 100, "maxBackoffMs": 5000},
                      "timeoutMs": 10000}
          },
          "defaults": {"server": "apisvr", "timeoutMs": 30000,
                       "retry": {"maxAttempts": 1}, "headers": {"User-Agent": "hydra/VERSION"}},
          "dummy": {
            "enabled": false,
            "responses": [
              {"server": "apisvr", "endpoint": "/v1/hello/:name", "method": "GET",
               "status": 200, "headers": {"content-type": "application/json"},
               "body": {"name": "debugPlayer"}, "delayMs": 800}
            ]
          },
          "jobs": {"path": "jobs"},
          "limits": {"maxQueuedJobs": 1000000},
          "retention": {"hours": 24},
          "allowEnv": []
        }
        """
        let config = try Configuration(json: try JSONParser.parse(example))
        #expect(config.rpc.listen == "127.0.0.1:7400" && config.rpc.maxConnections == 1024)
        #expect(config.workers.map(\.name) == ["rest", "local"] && config.workers[0].maxHostConnections == 16)
        #expect(config.apis["hello"]?.invalidates == ["list"])  // an api not configured: removes nothing
        #expect(config.dummy.enabled == false && config.dummy.responses.count == 1)
        #expect(config.retentionHours == 24 && config.maxQueuedJobs == 1_000_000)
        // An api without a server uses defaults.server.
        let implicit = try Configuration(json: try JSONParser.parse(
            #"{"servers":{"s":"http://h"},"defaults":{"server":"s"},"apis":{"a":{"endpoint":"/"}}}"#))
        #expect(implicit.apis["a"]?.server == "s")
        #expect(throws: ValidationError(path: "apis.a.server", "required when defaults.server is not set")) {
            _ = try Configuration(json: try JSONParser.parse(#"{"servers":{"s":"http://h"},"apis":{"a":{"endpoint":"/"}}}"#))
        }
    }

    @Test func shippedConfigurationLoads() throws {
        let path = PackageRoot.path("config/hydra.json")
        let config = try Configuration.load(path: path)
        #expect(config.workers.map(\.name) == ["rest", "local"])
        #expect(config.rpc.listen == "127.0.0.1:7400")
        let secured = try Configuration.load(path: path.replacingOccurrences(of: "hydra.json", with: "examples/secured.json"))
        #expect(secured.apis["updateProfile"]?.invalidates == ["profile"])
        #expect(secured.state.sync == .full)
        let throughput = try Configuration.load(path: path.replacingOccurrences(of: "hydra.json", with: "examples/throughput.json"))
        #expect(throughput.workers.count == 3)
    }

    @Test func templateSubstitution() throws {
        let scope = ReferenceScope(previous: ["body": ["id": 7, "name": "x"]], step: { $0 == "a" ? ["v": true] : nil },
                                   input: ["user": "gandalf"], environment: { $0 == "HOME" ? "/root" : nil })
        #expect(try Template.resolve("${prev.body.id}", in: scope) == 7)
        #expect(try Template.resolve("/u/${prev.body.id}/${input.user}", in: scope) == "/u/7/gandalf")
        #expect(try Template.resolve("${steps.a.v}", in: scope) == true)
        #expect(try Template.resolve("${env.HOME}", in: scope) == "/root")
        #expect(throws: ReferenceError.self) { try Template.resolve("${steps.b.v}", in: scope) }
        #expect(throws: ReferenceError.self) { try Template.resolve("${env.PATH}", in: scope) }
        #expect(throws: ReferenceError.self) { try Template.resolve("${prev.body.missing}", in: scope) }
    }

    @Test func referencesAreFoundAnywhereInAString() {
        for text in ["${a}", "ab${", "é${x}", "/u/$${id}", String(repeating: "x", count: 100) + "${y}"] {
            #expect(Template.containsReference(text), "\(text)")
        }
        for text in ["", "$", "{", "a$", "$ {", "{$}", "é$", "x$y{"] {
            #expect(!Template.containsReference(text), "\(text)")
        }
        // At every offset (the scan tests eight bytes at a time): across a word's end too.
        for at in 0..<24 {
            let x = String(repeating: "x", count: at)
            #expect(Template.containsReference(x + "${" + x), "\(at)")
            #expect(!Template.containsReference(x + "$" + x), "\(at)")
            #expect(!Template.containsReference(x + "$x{" + x), "\(at)")
            #expect(!Template.containsReference(x + "{$" + x), "\(at)")
        }
        #expect(Template.containsReference(["k": ["list": [1, "${prev}"]]] as JSONValue))
        #expect(!Template.containsReference(["k": ["list": [1, "$ {prev}"]]] as JSONValue))
        // Text without contiguous UTF-8 (bridged) takes the copying path: same answers.
        #expect(Template.containsReference(NSString(string: "é/u/$${id}") as String))
        #expect(!Template.containsReference(NSString(string: "é$ {x}$") as String))
    }

    @Test func partialRetryPoliciesFillFieldByField() throws {
        func parse(_ text: String) throws -> RetryPolicy {
            var reader = try FieldReader(try JSONParser.parse(text), path: "retry")
            return try RetryPolicy(reader: &reader)
        }
        let defaults = try parse(#"{"maxAttempts": 2}"#).filling(from: RetryPolicy())
        let api = try parse(#"{"backoffMs": 7}"#)
        let job = try parse(#"{"maxAttempts": 4}"#)
        #expect(api.filling(from: defaults) == RetryPolicy(maxAttempts: 2, backoffMs: 7, maxBackoffMs: 5000))
        #expect(job.filling(from: api.filling(from: defaults)) == RetryPolicy(maxAttempts: 4, backoffMs: 7, maxBackoffMs: 5000))
        #expect(job.json == ["maxAttempts": 4])  // written back as given
    }

    @Test func retryBackoffIsCappedExponentialWithJitter() {
        let policy = RetryPolicy(maxAttempts: 5, backoffMs: 100, maxBackoffMs: 300)
        #expect(policy.baseDelayMs(afterAttempt: 1) == 100)
        #expect(policy.baseDelayMs(afterAttempt: 2) == 200)
        #expect(policy.baseDelayMs(afterAttempt: 3) == 300)
        for _ in 0..<100 {
            let d = policy.delayMs(afterAttempt: 2)
            #expect(d >= 100 && d <= 200)
        }
        // A peer's policy at the edge of Int: capped at the longest wait, never a trap
        // (Double(Int.max) is 2^63, which no Int holds).
        let huge = RetryPolicy(maxAttempts: 100, backoffMs: .max, maxBackoffMs: .max)
        for attempt in [1, 2, 31, 99] {
            #expect(huge.baseDelayMs(afterAttempt: attempt) == RetryPolicy.maxDelayMs)
            #expect(huge.delayMs(afterAttempt: attempt) <= RetryPolicy.maxDelayMs)
        }
        #expect(RetryPolicy(maxAttempts: 5, backoffMs: 1 << 62, maxBackoffMs: 50).baseDelayMs(afterAttempt: 4) == 50)
    }
}
