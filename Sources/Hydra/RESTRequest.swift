import Foundation
import HydraCore
import OrderedCollections

/// A fluent, typed request in the HJRestClientManager spirit: address it
/// (url, server + endpoint, or api), add path variables, query, headers and a
/// `Codable` body, name the response model, then `await` it (or `resume` with
/// a callback). It runs as an ordinary remote job: same routes, retries,
/// dummy responses and events.
///
/// ```swift
/// let user = try await engine.request("GET").api("user").pathVar("id", "7")
///     .decoding(User.self).send().model
/// ```
public struct RESTRequest<Response: Decodable & Sendable>: Sendable {
    private let engine: HydraEngine
    private var spec: RemoteSpec
    private var timeoutMs: Int?
    private var worker: String?
    private var priority = 0

    init(engine: HydraEngine, spec: RemoteSpec) {
        self.engine = engine
        self.spec = spec
    }

    private func with(_ change: (inout RESTRequest) -> Void) -> RESTRequest {
        var copy = self
        change(&copy)
        return copy
    }

    public func url(_ url: String) -> Self { with { $0.spec.url = url } }
    public func server(_ key: String) -> Self { with { $0.spec.server = key } }
    public func endpoint(_ path: String) -> Self { with { $0.spec.endpoint = path } }
    public func api(_ key: String) -> Self { with { $0.spec.api = key } }
    public func method(_ method: String) -> Self { with { $0.spec.method = method.uppercased() } }
    public func pathVar(_ name: String, _ value: String) -> Self { with { $0.spec.pathVars[name] = .string(value) } }
    public func query(_ name: String, _ value: String) -> Self { with { $0.spec.query[name] = .string(value) } }
    public func header(_ name: String, _ value: String) -> Self { with { $0.spec.headers[name] = .string(value) } }
    public func dogma(_ name: String) -> Self { with { $0.spec.dogma = name } }
    public func expect(_ statuses: [Int]) -> Self { with { $0.spec.expect = statuses } }
    public func retry(_ policy: RetryPolicy) -> Self { with { $0.spec.retry = policy } }
    public func timeout(milliseconds: Int) -> Self { with { $0.timeoutMs = milliseconds } }
    public func worker(_ name: String) -> Self { with { $0.worker = name } }
    public func priority(_ priority: Int) -> Self { with { $0.priority = priority } }

    /// The auth session the request uses (rest.md §1), over its api's and server's.
    public func auth(_ name: String) -> Self { with { $0.spec.auth = name } }
    /// A raw body streamed from a file under the state folder (rest.md §2).
    public func bodyFile(_ path: String) -> Self { with { $0.spec.bodyFile = path } }
    /// A `multipart/form-data` body; file parts are streamed from the state folder.
    public func multipart(_ parts: [MultipartPart]) -> Self {
        with {
            $0.spec.bodyEncoding = .multipart
            $0.spec.body = ["parts": .array(parts.map { part in
                var o: OrderedDictionary<String, JSONValue> = ["name": .string(part.name)]
                switch part.content {
                case .value(let value): o["value"] = value
                case .file(let path): o["file"] = .string(path)
                }
                if let filename = part.filename { o["filename"] = .string(filename) }
                if let type = part.contentType { o["contentType"] = .string(type) }
                return .object(o)
            })]
        }
    }
    /// Adds `Content-MD5` of the body as sent.
    public func contentMD5() -> Self { with { $0.spec.contentMD5 = true } }
    /// Compresses the body (`Content-Encoding: gzip`).
    public func gzipBody() -> Self { with { $0.spec.gzipBody = true } }
    /// Sends the request again every `everyMs` until the value at `path` equals `value` (rest.md §5).
    public func poll(everyMs: Int, until path: String, equals value: JSONValue, maxTimes: Int = RepeatSpec.defaultMaxTimes) -> Self {
        with { $0.spec.repeat = RepeatSpec(everyMs: everyMs, path: path, equals: value, maxTimes: maxTimes) }
    }
    /// How the response cache is used (rest.md §3; a server's engine has one).
    public func cache(_ cache: CacheSpec) -> Self { with { $0.spec.cache = cache } }
    /// Shares an identical GET in flight (rest.md §4).
    public func coalesce(_ on: Bool = true) -> Self { with { $0.spec.coalesce = on } }
    /// Text echoed in the step's events (rest.md §8).
    public func label(_ text: String) -> Self { with { $0.spec.label = text } }

    /// A JSON value as the body, sent with `encoding`.
    public func body(json: JSONValue, encoding: BodyEncoding = .json) -> Self {
        with {
            $0.spec.body = json
            $0.spec.bodyEncoding = encoding
        }
    }

    /// An `Encodable` model as the JSON body.
    public func body<Model: Encodable>(_ model: Model) throws -> Self {
        let data = try JSONEncoder().encode(model)
        return body(json: try JSONParser.parse([UInt8](data)))
    }

    /// Decode the response body into `Model` (from the dogma's JSON value).
    public func decoding<Model: Decodable & Sendable>(_ type: Model.Type) -> RESTRequest<Model> {
        var request = RESTRequest<Model>(engine: engine, spec: spec)
        request.timeoutMs = timeoutMs
        request.worker = worker
        request.priority = priority
        return request
    }

    /// The remote job this request runs.
    public var jobSpec: JobSpec {
        var job = JobSpec.remote(spec)
        job.timeoutMs = timeoutMs
        job.worker = worker
        return job
    }

    /// Sends the request and waits for the typed response. Throws a
    /// ``ValidationError`` for a request that cannot be made, a ``JobError``
    /// when it fails (kind `http` keeps the status and decoded body), and a
    /// `DecodingError` when the body does not fit `Response`.
    public func send() async throws -> RESTResponse<Response> {
        let result = try await engine.run(jobSpec, priority: priority)
        return try RESTRequest.response(from: result)
    }

    /// Sends the request; `completion` runs once with the outcome, on the
    /// engine's coordinator thread (keep it quick).
    public func resume(_ completion: @escaping @Sendable (Result<RESTResponse<Response>, any Error>) -> Void) {
        do {
            try engine.submit(jobSpec, priority: priority) { result in
                completion(Result { try RESTRequest.response(from: result) })
            }
        } catch {
            completion(.failure(error))
        }
    }

    private static func response(from result: JobResult) throws -> RESTResponse<Response> {
        guard result.state == .succeeded, let value = result.result else {
            throw result.error ?? JobError(.internal, "no result")
        }
        let body = value["body"] ?? .null
        let model: Response
        if let same = body as? Response {
            model = same
        } else {
            model = try JSONDecoder().decode(Response.self, from: Data(JSONWriter.bytes(body)))
        }
        var headers: [String: String] = [:]
        for (name, header) in value["headers"]?.objectValue ?? [:] { headers[name] = header.stringValue }
        return RESTResponse(status: value["status"]?.intValue ?? 0, headers: headers, model: model, body: body,
                            attempts: value["attempts"]?.intValue ?? 1, elapsedMs: value["elapsedMs"]?.doubleValue ?? 0)
    }
}

/// A typed response: the status, headers (names lowercased), the decoded model,
/// and the body as the dogma decoded it.
public struct RESTResponse<Model: Sendable>: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let model: Model
    public let body: JSONValue
    public let attempts: Int
    public let elapsedMs: Double
}

extension HydraEngine {
    /// Starts a fluent request (default method: the api's, else GET).
    public func request(_ method: String? = nil) -> RESTRequest<JSONValue> {
        RESTRequest(engine: self, spec: RemoteSpec(method: method?.uppercased()))
    }
}
