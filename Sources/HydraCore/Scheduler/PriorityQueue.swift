import DequeModule
import HydraLoop
import Synchronization

/// FIFO per priority, highest priority first. Priority 0 (the common case) is a plain deque.
struct PriorityQueue {
    private var normal = Deque<WorkTask>()
    private var others: [Int: Deque<WorkTask>] = [:]
    private var priorities: [Int] = []  // of `others`, descending
    private(set) var count = 0

    mutating func push(_ task: WorkTask) {
        count += 1
        if task.priority == 0 { normal.append(task); return }
        if others[task.priority] == nil {
            priorities.append(task.priority)
            priorities.sort(by: >)
        }
        others[task.priority, default: []].append(task)
    }

    mutating func pop() -> WorkTask? {
        for (i, priority) in priorities.enumerated() {
            if priority < 0 && !normal.isEmpty { break }
            if let task = others[priority]?.popFirst() {
                count -= 1
                if others[priority]!.isEmpty {
                    others[priority] = nil
                    priorities.remove(at: i)
                }
                return task
            }
        }
        if let task = normal.popFirst() { count -= 1; return task }
        return nil
    }
}
