import Foundation
import OrderedCollections

/// What a `${EXPR}` reference can see when a step starts (protocol §4 References).
public struct ReferenceScope {
    /// The previous step's result (serial groups only); nil when there is none.
    public var previous: JSONValue?
    /// Results of finished steps of the same graph, by step id.
    public var step: (String) -> JSONValue?
    /// The graph's input.
    public var input: JSONValue
    /// Shared data, by key.
    public var shared: (String) -> JSONValue?
    /// Why the shared key `key`, which `shared` did not give, cannot be read
    /// though it is there (an aes-gcm value without `HYDRA_SHARED_KEY`); nil
    /// when it is just not there.
    public var sharedProblem: (String) -> String? = { _ in nil }
    /// Environment variables, only those the configuration allows.
    public var environment: (String) -> String?
    /// Bytes the referenced values may add to one resolution (see ``ReferenceBudget``); nil: no limit.
    public var budget: ReferenceBudget?

    public init(previous: JSONValue? = nil, step: @escaping (String) -> JSONValue? = { _ in nil },
                input: JSONValue = .null, shared: @escaping (String) -> JSONValue? = { _ in nil },
                environment: @escaping (String) -> String? = { _ in nil }, budget: ReferenceBudget? = nil) {
        self.budget = budget
        self.previous = previous
        self.step = step
        self.input = input
        self.shared = shared
        self.environment = environment
    }
}
