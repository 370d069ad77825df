/// Objects the managers bound to one worker share, by name: the REST client
/// manager's connection pool (an `HTTPClient`), which the resource manager's
/// transfers use too. Loop-confined: used only on the worker's loop thread
/// (where executors are made and run); Sendable only to travel in
/// ``WorkerContext``.
public final class WorkerServices: @unchecked Sendable {
    private var objects: [String: AnyObject] = [:]

    init() {}

    /// The object named `name`, made by `make` the first time. Worker's loop thread.
    public func object<T: AnyObject>(_ name: String, make: () -> T) -> T {
        if let existing = objects[name] as? T { return existing }
        let made = make()
        objects[name] = made
        return made
    }
}
