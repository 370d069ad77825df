/// The named jobs a job loaded when it was submitted, as recorded with it
/// (``PreparedJob/namedJobs``): what a restart resumes and `job.status`
/// counts, whatever the jobs folder holds by then. Immutable; thread-safe.
public struct RecordedJobLibrary: JobLibrary {
    private let specs: [String: JSONValue]

    /// `record`: the object ``PreparedJob/namedJobs`` made (name -> spec JSON).
    public init(record: JSONValue) {
        var specs: [String: JSONValue] = [:]
        if case .object(let members) = record {
            for (name, spec) in members { specs[name] = spec }
        }
        self.specs = specs
    }

    public func spec(named name: String, path: String) throws(ValidationError) -> JobSpec {
        guard let json = specs[name] else {
            throw ValidationError(path: path, "the job '\(name)' is not in what was recorded at submit", notFound: true)
        }
        do {
            return try JobSpec(json: json)
        } catch {
            throw ValidationError(path: path, "jobs folder: \(name).json (as submitted): \(error)")
        }
    }
}
