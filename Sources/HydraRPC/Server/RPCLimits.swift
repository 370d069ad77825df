/// Bounds this server puts on what a call may ask for, shared with the CLI so
/// that it refuses the same values before sending them.
public enum RPCLimits {
    /// The longest `job.result` `waitMs`: an hour.
    public static let maxWaitMs = 3_600_000
}
