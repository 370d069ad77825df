import Foundation

/// How long a followed stream whose connection ended is taken up again: for
/// 10 seconds from the first loss since the last event seen, so a server
/// that closes every new connection at once does not hold the command for ever.
struct ReconnectWindow {
    static let seconds = 10.0
    private var seqAtLoss = -1
    private(set) var deadline = Date.distantPast

    /// True while a loss with `lastSeq` the last event seen may be taken up
    /// again (a new event since the last loss opens a new window).
    mutating func allows(at lastSeq: Int) -> Bool {
        if lastSeq != seqAtLoss {
            seqAtLoss = lastSeq
            deadline = Date().addingTimeInterval(Self.seconds)
        }
        return Date() < deadline
    }
}
