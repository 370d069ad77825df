import HydraCore

/// The live subscriptions of every connection, indexed by what they filter
/// on, so an event costs only the subscriptions that may want it (protocol
/// §6: "the cost of an event must not grow with subscriptions that do not
/// match it"). RPC loop thread only.
///
/// A subscription with a `jobId` filter is found under that id (an event
/// is looked up under its `jobId` and its `rootJobId`); one with `shared`
/// keys under each key (looked up by a shared event's `key`); one with
/// neither in the "any job or key" bucket. Within each, a subscription with
/// an `events` filter is found under each of its names, one without under
/// "any name". Candidates are still checked with ``EventFilter/matches(_:)``,
/// which they pass by construction.
final class SubscriptionIndex {
    /// Subscriptions of one job id, shared key, or of neither.
    private struct Bucket {
        var anyName: [Int: Subscription] = [:]
        var byName: [String: [Int: Subscription]] = [:]

        var isEmpty: Bool { anyName.isEmpty && byName.isEmpty }

        mutating func insert(_ s: Subscription) {
            if let names = s.filter.events {
                for name in names { byName[name, default: [:]][s.number] = s }
            } else {
                anyName[s.number] = s
            }
        }

        mutating func remove(_ s: Subscription) {
            if let names = s.filter.events {
                for name in names {
                    byName[name]?[s.number] = nil
                    if byName[name]?.isEmpty == true { byName[name] = nil }
                }
            } else {
                anyName[s.number] = nil
            }
        }

        func forEach(named name: String, _ body: (Subscription) -> Void) {
            for s in anyName.values { body(s) }
            if let named = byName[name] { for s in named.values { body(s) } }
        }
    }

    private var unscoped = Bucket()
    private var byJobId: [String: Bucket] = [:]
    private var byShared: [String: Bucket] = [:]
    /// Live subscriptions indexed.
    private(set) var count = 0

    func insert(_ s: Subscription) {
        let filter = s.filter
        if filter.jobId == nil && filter.shared == nil { unscoped.insert(s) }
        if let jobId = filter.jobId { byJobId[jobId, default: Bucket()].insert(s) }
        // An empty `shared` list matches no event (EventFilter): indexed nowhere.
        for key in filter.shared ?? [] { byShared[key, default: Bucket()].insert(s) }
        count += 1
    }

    func remove(_ s: Subscription) {
        let filter = s.filter
        if filter.jobId == nil && filter.shared == nil { unscoped.remove(s) }
        if let jobId = filter.jobId {
            byJobId[jobId]?.remove(s)
            if byJobId[jobId]?.isEmpty == true { byJobId[jobId] = nil }
        }
        for key in filter.shared ?? [] {
            byShared[key]?.remove(s)
            if byShared[key]?.isEmpty == true { byShared[key] = nil }
        }
        count -= 1
    }

    /// Calls `body` with each live subscription that may match `event`, once each.
    /// `body` must not insert or remove subscriptions.
    func forEachCandidate(of event: HydraEvent, _ body: (Subscription) -> Void) {
        unscoped.forEach(named: event.name, body)
        if event.isJobEvent {
            byJobId[event.jobId]?.forEach(named: event.name, body)
            if event.rootJobId != event.jobId { byJobId[event.rootJobId]?.forEach(named: event.name, body) }
        } else if event.name.hasPrefix("shared."), let key = event.fields["key"]?.stringValue {
            byShared[key]?.forEach(named: event.name, body)
        }
    }
}
