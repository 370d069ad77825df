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
