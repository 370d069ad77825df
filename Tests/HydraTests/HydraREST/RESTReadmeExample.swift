import Foundation
import Hydra

// The README's Swift example of the REST manager's second half, compiled and
// run by RESTReadmeExampleTests: an auth session, an upload, polling.

/// Logs in, uploads a report with its metadata, then polls until the report is processed.
func uploadReport(engine: HydraEngine, password: String) async throws -> (uploaded: JSONValue, status: JSONValue) {
    try await engine.login(auth: "user", username: "alice", password: password)  // the password is not kept
    let upload = try await engine.request("POST").api("reports")               // the api says "auth": "user"
        .multipart([MultipartPart(name: "meta", content: .value(["kind": "daily"])),
                    MultipartPart(name: "file", content: .file("uploads/report.csv"), contentType: "text/csv")])
        .contentMD5()
        .send()
    let status = try await engine.request().api("reportStatus")
        .poll(everyMs: 5, until: "body.hits", equals: 3, maxTimes: 20)          // job.progress per round
        .send()
    return (upload.model, status.model)
}

/// The README's embedding hooks, as written (`import Hydra` alone), with a
/// stand-in `sign`; registered by RESTReadmeExampleTests.
func installReadmeHooks(on engine: HydraEngine) throws {
    @Sendable func sign(_ url: String, attempt: Int) -> String { "signed-\(attempt)" }
    try engine.rest.addRequestPreparer { request, context in        // every request, before each attempt
        request.headers.append(HTTPHeader("X-Signature", sign(request.url, attempt: context.attempt)))
    }
    try engine.rest.addResponseProcessor(forAPI: "orders") { response, _ throws(JobError) in
        guard response.status != 299 else { throw JobError(.network, "proxy hiccup") }  // retried like one
        if let json = try? JSONParser.parse(response.body), let data = json["data"] {
            response.body = JSONWriter.bytes(data)                      // unwrap the envelope before the dogma
        }
    }
    try engine.rest.setErrorMapper { response, _ in                  // the message of a failed `expect`
        (try? JSONParser.parse(response.body))?["error"]?.stringValue
    }
}
