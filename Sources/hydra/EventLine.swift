import Foundation
import Hydra

/// One event as a line for people (`--pretty`): local time, event name, which
/// job and step, and the one or two fields that matter for that event:
///
///     12:00:01.123  job.succeeded   j1 step 1.0  status 200 3.2ms
///     12:00:01.130  job.failed      j1 step 2    internal: nope
///
/// Scripts keep the JSON lines (the default), which carry every field.
enum EventLine {
    /// Longest event name (`shared.updated`), so the subjects line up.
    private static let nameWidth = 14
    /// Values shown inline are cut here, so one event stays one line.
    private static let valueWidth = 60

    static func string(_ event: JSONValue) -> String {
        let name = event["event"]?.stringValue ?? "?"
        let time = event["time"]?.stringValue.map(clock) ?? ""
        var subject = event["jobId"]?.stringValue ?? ""
        if let step = event["stepPath"]?.stringValue, !step.isEmpty { subject += " step \(step)" }
        if subject.isEmpty, let key = event["key"]?.stringValue { subject = key }
        let parts = [time, name.padding(toLength: max(nameWidth, name.count), withPad: " ", startingAt: 0),
                     subject, detail(name, event)]
        // Names, keys, labels and errors come from jobs and origins: no escape sequence reaches the terminal.
        return TerminalText.safe(parts.filter { !$0.isEmpty }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
    }

    /// What this kind of event says beyond its name and subject.
    private static func detail(_ name: String, _ event: JSONValue) -> String {
        switch name {
        case EventName.queued:
            return event["spec"].map(specSummary) ?? ""
        case EventName.started:
            return event["worker"]?.stringValue.map { "on \($0)" } ?? ""
        case EventName.retrying:
            let attempt = event["attempt"]?.intValue.map { "attempt \($0)" } ?? "retry"
            let delay = event["delayMs"]?.intValue.map { " in \($0)ms" } ?? ""
            return "\(attempt)\(delay)" + (event["error"].map { ": " + errorSummary($0) } ?? "")
        case EventName.progress:
            let bytes = event["bytes"]?.intValue ?? 0
            return event["totalBytes"]?.intValue.map { "\(bytes)/\($0) bytes" } ?? "\(bytes) bytes"
        case EventName.succeeded:
            return event["result"].map(resultSummary) ?? ""
        case EventName.skipped:
            return event["reason"]?.stringValue ?? ""
        case EventName.failed:
            return event["error"].map(errorSummary) ?? ""
        case EventName.resumed:
            return event["stepsDone"]?.intValue.map { "\($0) steps were done before the restart" } ?? ""
        case EventName.groupDone:
            if event["stopped"]?.boolValue == true { return "stopped" }
            return event["results"]?.arrayValue.map { "\($0.count) results" } ?? ""
        case EventName.sharedUpdated:
            return event["value"].map(short) ?? ""
        default:
            guard case .object(var fields) = event else { return "" }
            for key in ["seq", "event", "jobId", "rootJobId", "stepPath", "time", "key", "subscription"] {
                fields[key] = nil
            }
            return fields.isEmpty ? "" : short(.object(fields))
        }
    }

    /// `local echo`, `serial 3 steps`, `remote GET /items`, `job nightly`.
    private static func specSummary(_ spec: JSONValue) -> String {
        let type = spec["type"]?.stringValue ?? "?"
        var words = [type]
        if let id = spec["id"]?.stringValue { words.append("'\(id)'") }
        if let steps = spec["steps"]?.intValue { words.append("\(steps) steps") }
        for key in ["name", "method", "api", "server", "endpoint", "url"] {
            if let value = spec[key]?.stringValue { words.append(value) }
        }
        return words.joined(separator: " ")
    }

    /// `status 200 3.2ms` (and `from cache`) for a remote result; the value itself otherwise.
    private static func resultSummary(_ result: JSONValue) -> String {
        guard let status = result["status"]?.intValue, let elapsed = result["elapsedMs"]?.doubleValue else {
            return short(result)
        }
        let cache = result["fromCache"]?.boolValue == true ? " from cache" : ""
        return "status \(status) " + String(format: "%.1fms", elapsed) + cache
    }

    /// `kind: message` (and the HTTP status when there is one).
    private static func errorSummary(_ error: JSONValue) -> String {
        guard let message = error["message"]?.stringValue else { return short(error) }
        let kind = error["kind"]?.stringValue.map { "\($0): " } ?? ""
        let status = error["status"]?.intValue.map { " (status \($0))" } ?? ""
        return kind + message + status
    }

    /// Compact JSON, cut to `valueWidth` characters.
    private static func short(_ value: JSONValue) -> String {
        let text = JSONWriter.string(value)
        return text.count <= valueWidth ? text : String(text.prefix(valueWidth - 1)) + "…"
    }

    /// `HH:MM:SS.mmm` in local time from the wire's `2026-11-22T10:00:00.123Z`.
    static func clock(_ iso: String) -> String {
        let numbers = iso.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        guard numbers.count >= 6 else { return iso }
        var utc = tm()
        utc.tm_year = Int32(numbers[0] - 1900)
        utc.tm_mon = Int32(numbers[1] - 1)
        utc.tm_mday = Int32(numbers[2])
        utc.tm_hour = Int32(numbers[3])
        utc.tm_min = Int32(numbers[4])
        utc.tm_sec = Int32(numbers[5])
        var seconds = timegm(&utc)
        var local = tm()
        localtime_r(&seconds, &local)
        let millis = numbers.count > 6 ? numbers[6] : 0
        return String(format: "%02d:%02d:%02d.%03d", Int(local.tm_hour), Int(local.tm_min), Int(local.tm_sec), millis)
    }
}
