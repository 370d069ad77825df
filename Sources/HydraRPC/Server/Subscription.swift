import HydraCore

/// One `events.subscribe` of a session. RPC loop thread only.
///
/// A subscription is either replaying (`replay` set: it catches up from
/// `fromSeq`, page by page, and takes no live event) or live (in the
/// server's ``SubscriptionIndex``, taking the events after `after`).
final class Subscription {
    /// `s<number>`, unique in the server's lifetime.
    let id: String
    let number: Int
    let filter: EventFilter
    unowned let session: RPCSession
    /// Events up to this seq are not sent live: the client has them (its
    /// `fromSeq`, or the end of its replay).
    var after: UInt64 = 0
    /// Where its replay stands, while it replays.
    var replay: ReplayCursor?
    /// False once unsubscribed or dropped: replay pages read meanwhile are thrown away.
    var active = true
    /// Asked for with `caughtUp: true` (extension): one `hydra.caughtUp`
    /// notice when the subscription goes live, after its replay if it has one.
    var announcesCaughtUp = false

    init(number: Int, filter: EventFilter, session: RPCSession) {
        self.id = "s\(number)"
        self.number = number
        self.filter = filter
        self.session = session
    }
}
