import DequeModule
import Foundation
import HydraCore
import HydraServer
import HydraLoop

/// Where the `fromSeq` replay of a subscription stands. RPC loop thread only.
///
/// A replay goes page by page (``ReplayCursor/pageSize`` events read at a
/// time, from the server's ring of recent events when it reaches back far
/// enough, else from the store off the loop), and the next page is read
/// only once the connection's outgoing buffer is back under
/// `rpc.maxOutboundBytes`: a client that does not read holds one page in
/// memory, never the whole history. While it replays, a subscription takes
/// no live event; it catches up with them through the ring, then goes live
/// with `after` = the last seq it read, so there is no gap and no duplicate.
struct ReplayCursor {
    /// Events read from the store or the ring at a time.
    static let pageSize = 1_000

    /// Every event up to this seq has been read (and the matching ones queued in `pending`).
    var scanned: UInt64
    /// Matching events read but not sent yet, oldest first (at most one page).
    var pending = Deque<HydraEvent>()
    /// A page is being read from the store, off the loop.
    var reading = false
    /// Every event up to this seq is known to be committed in the store (set by the last flush).
    var committed: UInt64 = 0

    init(after seq: UInt64) { scanned = seq }
}

extension RPCServerRuntime {
    /// Starts (on a later loop turn, after the `events.subscribe` reply) the
    /// replay of events after `fromSeq` for `subscription`.
    func startReplay(_ subscription: Subscription, after fromSeq: UInt64) {
        subscription.replay = ReplayCursor(after: fromSeq)
        subscription.session.replaying += 1
        let context = LoopBound((self, subscription), loop: loop)
        loop.execute {
            let (server, subscription) = context.value
            server.pumpReplay(subscription)
        }
    }

    /// The connection drained: replays that waited for it go on.
    func resumeReplays(of session: RPCSession) {
        guard session.replaying > 0 else { return }
        for subscription in session.subscriptions.values where subscription.replay != nil {
            pumpReplay(subscription)
        }
    }

    /// Sends what the replay has read while the connection takes it, reads the
    /// next page when all is sent, and goes live once caught up.
    func pumpReplay(_ subscription: Subscription) {
        guard subscription.active, var cursor = subscription.replay, !cursor.reading else { return }
        let session = subscription.session
        defer { if subscription.replay != nil { subscription.replay = cursor } }
        while true {
            while let event = cursor.pending.first {
                // Wait for the drain (resumeReplays) rather than pile up.
                if session.isBackedUp || session.closed { return }
                cursor.pending.removeFirst()
                var out: [UInt8] = []
                RPCEncoder.eventNotification(subscription: subscription.id, event: event.encodedJSON(), into: &out)
                session.send(raw: out)
            }
            if cursor.scanned >= lastSeq {
                // Caught up: live from here (the events after `scanned` are not sent yet).
                subscription.replay = nil
                session.replaying -= 1
                subscription.after = cursor.scanned
                index.insert(subscription)
                announceCaughtUp(subscription)
                return
            }
            if let oldest = recent.first, oldest.seq <= cursor.scanned + 1 {
                readRingPage(into: &cursor, filter: subscription.filter)
                continue
            }
            cursor.reading = true
            readStorePage(for: subscription, after: cursor.scanned, committed: cursor.committed)
            return
        }
    }

    /// Reads up to a page of events after `cursor.scanned` from the ring.
    private func readRingPage(into cursor: inout ReplayCursor, filter: EventFilter) {
        // The first event after `scanned` (seqs in the ring increase).
        var low = 0, high = recent.count
        while low < high {
            let mid = (low + high) / 2
            if recent[mid].seq <= cursor.scanned { low = mid + 1 } else { high = mid }
        }
        let end = min(recent.count, low + ReplayCursor.pageSize)
        for i in low..<end where filter.matches(recent[i]) { cursor.pending.append(recent[i]) }
        cursor.scanned = end > low ? recent[end - 1].seq : lastSeq
    }

    /// Reads the page of events after `after` from the store, off the loop (a
    /// flush waits for a commit), and hands it to ``storePageRead``.
    private func readStorePage(for subscription: Subscription, after: UInt64, committed: UInt64) {
        let context = LoopBound((self, subscription), loop: loop)
        let bus = service.engine.bus, store = service.store, loop = self.loop, reads = service.reads
        let filter = subscription.filter
        // Events up to `upTo` reached this loop: their emits handed them to the
        // store journal too, so after a flush they are all committed.
        let upTo = committed > after ? committed : lastSeq
        let flush = upTo > committed
        reads.run {
            let read = Result { () throws(StoreError) -> [HydraEvent] in
                if flush {
                    bus.waitForEmits()
                    store.flush()
                }
                // Matched in the store as far as it can (a job's events in a long history).
                return try store.events(after: after, limit: ReplayCursor.pageSize, jobId: filter.jobId, names: filter.events)
            }
            loop.execute {
                let (server, subscription) = context.value
                server.storePageRead(read, upTo: upTo, for: subscription)
            }
        }
    }

    /// A page read from the store: events up to `upTo` (all committed) count;
    /// later ones are read again, from the ring or the next page.
    private func storePageRead(_ read: Result<[HydraEvent], StoreError>, upTo: UInt64, for subscription: Subscription) {
        guard subscription.active, var cursor = subscription.replay else { return }
        cursor.reading = false
        switch read {
        case .success(let page):
            cursor.committed = max(cursor.committed, upTo)
            for event in page where event.seq > cursor.scanned && event.seq <= upTo
            && subscription.filter.matches(event) {
                cursor.pending.append(event)
            }
            if page.count == ReplayCursor.pageSize, let last = page.last, last.seq < upTo {
                cursor.scanned = last.seq
            } else {
                // Every committed event up to `upTo` was in this page.
                cursor.scanned = max(cursor.scanned, upTo)
            }
            subscription.replay = cursor
            pumpReplay(subscription)
        case .failure(let error):
            subscription.replay = cursor
            remove([subscription], from: subscription.session)
            subscription.session.send(RPCEncoder.notification("hydra.dropped", [
                "subscriptions": [.string(subscription.id)],
                "reason": .string("replay failed: \(ServiceError(error).message)"),
            ]))
        }
    }
}
