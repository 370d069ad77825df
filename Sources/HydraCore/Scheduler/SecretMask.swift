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
    ///
    /// A value that is an object or an array is also recorded leaf by leaf:
    /// a reference to the whole value puts it in a result as JSON, not as one
    /// text, and its strings and numbers there are what must not show (an
    /// object of secrets came back whole). Leaves shorter than four
    /// characters are left out: masking every `1` or `id` of a result would
    /// hide what is not secret, and such a leaf keeps nothing secret alone.
    mutating func add(_ value: JSONValue) {
        addForms(Template.text(of: value))
        switch value {
        case .array, .object: addLeaves(of: value)
        default: break
        }
    }

    private mutating func addLeaves(of value: JSONValue) {
        switch value {
        case .array(let items): for item in items { addLeaves(of: item) }
        case .object(let members): for item in members.values { addLeaves(of: item) }
        case .string, .int, .double:
            let text = Template.text(of: value)
            if text.count >= 4 { addForms(text) }
        default: break
        }
    }

    private mutating func addForms(_ text: String) {
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
        case .int, .double:
            // A secret number (a leaf of a secret object) reads as the mask, as a secret string does.
            return texts.contains(Template.text(of: value)) ? .string(Self.replacement) : value
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
