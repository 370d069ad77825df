import Foundation

/// A finished step of a graph.
public struct StoredStep: Sendable, Equatable {
    public var state: JobState
    public var result: JSONValue?
    public var error: JSONValue?

    public init(state: JobState, result: JSONValue?, error: JSONValue?) {
        self.state = state
        self.result = result
        self.error = error
    }
}
