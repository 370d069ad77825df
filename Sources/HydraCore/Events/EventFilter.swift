import Foundation
import OrderedCollections

/// Which events a subscriber wants (protocol §5 `events.subscribe`).
///
/// `jobId` limits job and group events to that job and its steps; `shared`
/// limits shared-data events to those keys; when either is given, events of
/// the other scope (and cache events) are left out. `events` limits names.
/// No filter at all: everything.
public struct EventFilter: Sendable {
    public var jobId: String?
    public var events: Set<String>?
    public var shared: Set<String>?

    public init(jobId: String? = nil, events: Set<String>? = nil, shared: Set<String>? = nil) {
        self.jobId = jobId
        self.events = events
        self.shared = shared
    }

    public func matches(_ event: HydraEvent) -> Bool {
        if let events, !events.contains(event.name) { return false }
        if event.isJobEvent {
            if let jobId { return event.rootJobId == jobId || event.jobId == jobId }
            return shared == nil
        }
        if event.name.hasPrefix("shared.") {
            if let shared { return event.fields["key"]?.stringValue.map(shared.contains) ?? false }
            return jobId == nil
        }
        return jobId == nil && shared == nil
    }
}
