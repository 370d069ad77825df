import Glibc
import HydraCore

/// How the store keeps events: the events one write transaction takes go in
/// one row of `event_batches` (migration 13), as JSON lines, one event a line:
///
///     [seq,"name","jobId","rootJobId","stepPath",microseconds,{fields}]
///
/// (`microseconds`: the event's time since 1970, an integer: written as
/// seconds, a time's digits cost more than the rest of its line).
///
/// A row per event cost the writer thread about a fifth of its time on a busy
/// server (three rows per job, seven values bound and inserted each); a
/// batch is one row however many events it holds. Reads decode the lines:
/// replays and a restart's look at what a job already sent are rare, and run
/// on the read connection, never on the writer.
///
/// A row's key is the highest seq it holds (`last_seq`), so "the events after
/// seq N" is a range of rows; `time` is its latest event's time (prune keeps a
/// row while any of its events is within retention, and trims the first one).
enum EventBatch {
    /// One event as stored, newline included: built by ``EncodedEvent`` on
    /// the emitting thread. `fields`: the JSON text of the fields object.
    static func line(seq: Int, _ event: HydraEvent, fields: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(fields.count + event.name.utf8.count + event.jobId.utf8.count
                            + event.rootJobId.utf8.count + event.stepPath.utf8.count + 56)
        out.append(UInt8(ascii: "["))
        JSONWriter.writeInt(seq, into: &out)
        // Written one by one: an array of the four would be allocated for every event.
        out.append(UInt8(ascii: ","))
        JSONWriter.writeString(event.name, into: &out)
        out.append(UInt8(ascii: ","))
        JSONWriter.writeString(event.jobId, into: &out)
        out.append(UInt8(ascii: ","))
        JSONWriter.writeString(event.rootJobId, into: &out)
        out.append(UInt8(ascii: ","))
        JSONWriter.writeString(event.stepPath, into: &out)
        out.append(UInt8(ascii: ","))
        JSONWriter.writeInt(microseconds(event.time), into: &out)
        out.append(UInt8(ascii: ","))
        // (memchr: a result's fields run to hundreds of bytes, looked at one by one before.)
        if fields.withUnsafeBytes({ $0.baseAddress.map { memchr($0, 0x0A, fields.count) != nil } ?? false }) {
            // Only whitespace between tokens can be a raw newline in JSON (one in a
            // string is escaped): a space keeps the value and the line whole.
            out.append(contentsOf: fields.lazy.map { $0 == UInt8(ascii: "\n") ? UInt8(ascii: " ") : $0 })
        } else {
            out.append(contentsOf: fields)
        }
        out.append(UInt8(ascii: "]"))
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// `seconds` as whole microseconds (0 when not finite or out of range).
    static func microseconds(_ seconds: Double) -> Int {
        let value = (seconds * 1_000_000).rounded()
        guard value.isFinite, abs(value) < 9.0e18 else { return 0 }
        return Int(value)
    }

    /// The event a stored line holds. `StoreError` when it is not one.
    static func event(_ line: JSONValue) throws(StoreError) -> HydraEvent {
        guard case .array(let items) = line, items.count == 7,
              let seq = items[0].intValue, seq >= 0,
              case .string(let name) = items[1], case .string(let jobId) = items[2],
              case .string(let rootJobId) = items[3], case .string(let stepPath) = items[4],
              case .object(let fields) = items[6]
        else { throw StoreError("corrupt event in the store: not [seq, name, jobId, rootJobId, stepPath, time, fields]") }
        return HydraEvent(seq: UInt64(seq), name: name, jobId: jobId, rootJobId: rootJobId, stepPath: stepPath,
                          time: (items[5].doubleValue ?? 0) / 1_000_000, fields: fields)
    }

    /// Bytes a row holds at most: a larger batch (a burst kept through a full
    /// disk) takes several rows, so no read ever decodes a huge one.
    static let maxRowBytes = 256 << 10

    static let insertRow = "INSERT INTO event_batches (last_seq, first_seq, time, events) VALUES (?, ?, ?, ?)"

    /// Inserts `events` (in seq order) as one row, or a few past
    /// ``maxRowBytes``, leaving out any whose seq is not above
    /// `storedThrough` (already stored: seq only grows). Returns the highest
    /// seq stored. Writer thread, inside the batch's transaction.
    static func insert(_ events: [EncodedEvent], after storedThrough: Int, on db: SQLiteConnection) throws(StoreError) -> Int {
        var through = storedThrough
        var data: [UInt8] = []
        data.reserveCapacity(min(maxRowBytes, events.reduce(0) { $0 + $1.line.count }))
        var first = 0
        var latest = -Double.greatestFiniteMagnitude
        func writeRow() throws(StoreError) {
            guard !data.isEmpty else { return }
            try db.run(insertRow, [.int(through), .int(first), .double(latest), .utf8(data)])
            data.removeAll(keepingCapacity: true)
            latest = -Double.greatestFiniteMagnitude
        }
        for event in events where event.seq > through {
            if data.isEmpty { first = event.seq }
            data.append(contentsOf: event.line)
            through = event.seq
            if event.time > latest { latest = event.time }
            if data.count >= maxRowBytes { try writeRow() }
        }
        try writeRow()
        return through
    }

    /// The highest seq ever stored, the pruned ones included (0: none).
    static func lastSeq(on db: SQLiteConnection) throws(StoreError) -> Int {
        var seq = 0
        try db.query("""
            SELECT MAX(COALESCE((SELECT MAX(last_seq) FROM event_batches), 0),
                       COALESCE((SELECT value FROM settings WHERE name = 'prunedUpTo'), 0))
            """) { row in seq = row.int(0) }
        return seq
    }

    /// Removes the events before the first one at or after `time`, as a
    /// prefix in seq order: a replay never meets a gap, and an event whose
    /// clock went back is kept with its neighbours. The highest seq removed
    /// is kept in `settings` (seq never goes back, even with every event
    /// gone). Writer thread, inside a transaction.
    static func prune(before time: Double, on db: SQLiteConnection) throws(StoreError) {
        // The first row holding a recent event (a scan by seq that stops there: no index on time).
        var boundary: (lastSeq: Int, firstSeq: Int)?
        try db.query("SELECT last_seq, first_seq FROM event_batches WHERE time >= ? ORDER BY last_seq LIMIT 1",
                     [.double(time)]) { row in boundary = (row.int(0), row.int(1)) }
        let before = boundary.map { " WHERE last_seq < \($0.firstSeq)" } ?? ""
        var removedUpTo: Int?
        try db.query("SELECT MAX(last_seq) FROM event_batches" + before) { row in
            if !row.isNull(0) { removedUpTo = row.int(0) }
        }
        try db.run("DELETE FROM event_batches" + before)
        if let boundary {
            // That row's own events before its first recent one go too: it is written again without them.
            var events: [HydraEvent] = []
            try db.query("SELECT events FROM event_batches WHERE last_seq = ?", [.int(boundary.lastSeq)]) { row throws(StoreError) in
                try row.jsonLines(0) { line throws(StoreError) in events.append(try event(line)) }
            }
            if let keep = events.firstIndex(where: { $0.time >= time }), keep > 0 {
                removedUpTo = max(removedUpTo ?? 0, Int(events[keep - 1].seq))
                var data: [UInt8] = []
                for event in events[keep...] {
                    data.append(contentsOf: line(seq: Int(event.seq), event, fields: JSONWriter.bytes(.object(event.fields))))
                }
                try db.run("UPDATE event_batches SET first_seq = ?, events = ? WHERE last_seq = ?",
                           [.int(Int(events[keep].seq)), .utf8(data), .int(boundary.lastSeq)])
            }
        }
        if let removedUpTo {
            try db.run("INSERT OR REPLACE INTO settings (name, value) VALUES ('prunedUpTo', ?)", [.int(removedUpTo)])
        }
    }
}
