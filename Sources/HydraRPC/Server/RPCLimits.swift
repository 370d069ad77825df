/// Bounds this server puts on what a call may ask for, shared with the CLI so
/// that it refuses the same values before sending them.
public enum RPCLimits {
    /// The longest `job.result` `waitMs`: an hour.
    public static let maxWaitMs = 3_600_000
    /// The most names or keys one `events.subscribe` filter lists (`events`,
    /// `shared`): 256 subscriptions of 90,000 keys held 1.75 GB on one connection.
    public static let maxFilterEntries = 1_000
    /// The most `job.result` calls one connection may have waiting at once
    /// (`-32004` past it): 400,000 waits on one job held 300 MB and, when the
    /// job ended, kept the RPC loop busy answering them for 3.5 s.
    public static let maxWaitsPerConnection = 1_000
    /// Wrong `rpc.auth` tokens a connection may send before it is closed (its
    /// last answer says so): one connection guessed 23,000 a second.
    public static let maxWrongTokens = 10
}
