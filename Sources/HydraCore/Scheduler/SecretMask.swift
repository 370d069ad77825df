import Foundation

/// The texts of secret shared values (aes-gcm keys) one step's references
/// read, and their masking: wherever such a text appears in the step's
/// result, error or retry events, it reads `***`.
///
/// Why: a secret is meant to leave the server only where a step sends it (a
/// header, a URL, a body). What the step reports back is journaled, stored
/// and emitted, so a step that echoes the secret, or a server that reflects
/// it, must not put it there in clear. Coordinator loop only.
public struct SecretMask: Sendable {
    public static let replacement = "***"

    private var texts: [String] = []

    var isEmpty: Bool { texts.isEmpty }

    /// Records a secret value a reference read: its text as references insert
    /// it, that text percent-encoded, as it reads in a URL (a query, a path
    /// segment) or a form body a server may send back, and in upper and lower
    /// case, as a field that normalises it (a method, a digest) may quote it.
    mutating func add(_ value: JSONValue) {
        let text = Template.text(of: value)
        guard !text.isEmpty else { return }
        for form in [text, PercentEncoding.encode(text), text.lowercased(), text.uppercased()] where !texts.contains(form) {
            texts.append(form)
        }
    }

    /// Adds the secrets of `other` (a step whose result this one reads in clear).
    mutating func formUnion(_ other: SecretMask) {
        for text in other.texts where !texts.contains(text) { texts.append(text) }
    }

    func masked(_ outcome: StepOutcome) -> StepOutcome {
        switch outcome {
        case .success(let result): return .success(masked(result))
        case .failure(let error, let result): return .failure(masked(error), result: result.map(masked))
        }
    }

    func masked(_ error: JobError) -> JobError {
        var error = error
        error.message = masked(error.message)
        error.body = error.body.map(masked)
        return error
    }

    func masked(_ value: JSONValue) -> JSONValue {
        guard !texts.isEmpty else { return value }
        switch value {
        case .string(let s): return .string(masked(s))
        case .array(let items): return .array(items.map(masked))
        case .object(let members):
            var out = members
            for (key, item) in members {
                let newKey = masked(key)
                if newKey != key {
                    out[key] = nil
                    out[newKey] = masked(item)
                } else {
                    out[key] = masked(item)
                }
            }
            return .object(out)
        default: return value
        }
    }

    func masked(_ text: String) -> String {
        var text = text
        for secret in texts where text.contains(secret) {
            text = text.replacingOccurrences(of: secret, with: Self.replacement)
        }
        return text
    }
}
