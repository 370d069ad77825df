import ArgumentParser
import HydraRPC

/// Refuses a `--wait` the server would refuse, before anything is sent (and
/// before `wait` plus the reply's margin could overflow).
func validateWait(_ wait: Int) throws {
    guard (0...RPCLimits.maxWaitMs).contains(wait) else {
        throw ValidationError("--wait: expected milliseconds from 0 to \(RPCLimits.maxWaitMs), got \(wait)")
    }
}

/// Refuses options given as empty text: an unset shell variable (`--prefix "$URL"`)
/// must not turn a narrow removal into "everything" (or silently into nothing).
func refuseEmpty(_ options: KeyValuePairs<String, String?>) throws {
    for (name, value) in options where value?.isEmpty == true {
        throw ValidationError("\(name): must not be empty")
    }
}
