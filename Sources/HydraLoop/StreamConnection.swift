import CUV
import Glibc

/// One accepted connection (TCP or Unix socket), framing its input as lines:
/// `\n`-terminated, a trailing `\r` stripped.
///
/// Loop thread only: every method, property and callback. Ownership: the
/// connection owns its handle; the handle keeps the object alive (through
/// `data`) until its close callback ran, so no callback reaches a freed
/// object. Writes are coalesced: whatever is written during one loop
/// iteration leaves in one system call.
public final class StreamConnection {
    private let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_stream_t>
    /// The peer, for logs: `127.0.0.1:54321` or `unix`.
    public let peer: String

    /// Lines longer than this (no `\n` within it) end reading: ``onLineTooLong`` runs once.
    public var maxLineBytes = 1 << 20
    /// One complete line, without its terminator.
    @exclusivity(unchecked) public var onLine: ((ArraySlice<UInt8>) -> Void)?
    /// The peer sent a line longer than ``maxLineBytes``; later input is ignored.
    @exclusivity(unchecked) public var onLineTooLong: (() -> Void)?
    /// Runs once, when the connection is gone (peer closed, error, or ``close()``).
    @exclusivity(unchecked) public var onClose: (() -> Void)?
    /// Runs when everything written has reached the kernel after a backlog.
    @exclusivity(unchecked) public var onDrain: (() -> Void)?
    /// The peer finished sending (it may still read): the owner closes when its
    /// answers are out. Unset, the connection closes once what is queued is written.
    @exclusivity(unchecked) public var onEnd: (() -> Void)?

    @exclusivity(unchecked) private var input: [UInt8] = []
    /// Where the search for `\n` resumes in `input`.
    @exclusivity(unchecked) private var scanned = 0
    @exclusivity(unchecked) private var readBuffer: UnsafeMutablePointer<CChar>?
    private static let readBufferSize = 64 * 1024
    @exclusivity(unchecked) private var reading = false
    @exclusivity(unchecked) private var tooLong = false

    @exclusivity(unchecked) private var outgoing: [UInt8] = []
    @exclusivity(unchecked) private var inFlight = 0
    @exclusivity(unchecked) private var flushScheduled = false
    @exclusivity(unchecked) private var closeWhenFlushed = false
    @exclusivity(unchecked) private var closing = false
    /// The peer ended its side (EOF was read): reading never starts again.
    @exclusivity(unchecked) private var peerEnded = false
    /// `uv_close` was called: kept here, because once its callback ran the
    /// handle's memory is freed and libuv's own flag there must not be read.
    @exclusivity(unchecked) private var handleClosed = false
    /// Set by ``closeAfterReading(timeoutMilliseconds:)``: once written out, the
    /// connection sends its FIN and reads (discarding) until the peer's, or the timer.
    @exclusivity(unchecked) private var lingering = false
    @exclusivity(unchecked) private var lingerTimer: LoopTimer?
    @exclusivity(unchecked) private var lingerMilliseconds: UInt64 = 0

    /// Takes over an initialized, accepted stream handle. Loop thread only.
    init(loop: EventLoop, handle: UnsafeMutablePointer<uv_stream_t>, peer: String) {
        self.loop = loop
        self.handle = handle
        self.peer = peer
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// True once closing began.
    public var isClosed: Bool { closing }

    /// Bytes accepted by ``write(_:)`` and not yet handed to the kernel.
    public var queuedBytes: Int { outgoing.count + inFlight }

    // MARK: - Reading

    func startReading() {
        // After the peer's end of input there is nothing more to read (reading again
        // would report that end a second time).
        guard !reading, !peerEnded, !closing || lingering, !tooLong || lingering else { return }
        reading = true
        uv_read_start(handle, { handle, _, buf in
            let me = Unmanaged<StreamConnection>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            if me.readBuffer == nil { me.readBuffer = .allocate(capacity: StreamConnection.readBufferSize) }
            buf!.pointee = uv_buf_init(me.readBuffer, UInt32(StreamConnection.readBufferSize))
        }, { handle, count, _ in
            let me = Unmanaged<StreamConnection>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            if count == Int(UV_EOF.rawValue) {
                me.ended()
            } else if count < 0 {
                me.closeNow()
            } else if count > 0 {
                me.received(count: count)
            }
        })
    }

    /// Stops reading (for example while a client's replies pile up).
    public func pauseReading() {
        guard reading, !closing else { return }
        reading = false
        uv_read_stop(handle)
    }

    /// Reads again after ``pauseReading()``.
    public func resumeReading() { startReading() }

    private func received(count: Int) {
        guard !tooLong, !lingering, let readBuffer else { return }  // lingering: read only to be discarded
        readBuffer.withMemoryRebound(to: UInt8.self, capacity: count) {
            input.append(contentsOf: UnsafeBufferPointer(start: $0, count: count))
        }
        var start = 0
        var i = scanned
        let newline = UInt8(ascii: "\n")
        while i < input.count {
            if input[i] == newline {
                var end = i
                if end > start, input[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                if end - start > maxLineBytes {  // the line itself: "\r\n" ends it like "\n"
                    lineTooLong()
                    return
                }
                onLine?(input[start..<end])
                if closing || tooLong { return }
                start = i + 1
            }
            i += 1
        }
        if start > 0 { input.removeFirst(start) }
        scanned = input.count
        // (A full line's worth and a "\r" may still end well: with the "\n" to come.)
        if input.count > maxLineBytes, input.count > maxLineBytes + 1 || input.last != UInt8(ascii: "\r") { lineTooLong() }
    }

    /// The peer ended its side (EOF): a last line without its newline is
    /// delivered like the others, then ``onEnd`` decides (by default the
    /// connection closes once what is queued is written). A lingering close
    /// waited for just this: it closes now.
    private func ended() {
        peerEnded = true
        if reading {
            reading = false
            uv_read_stop(handle)
        }
        if lingering || closing {
            closeNow()
            return
        }
        if !tooLong, !input.isEmpty {
            var end = input.count
            if input[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let line = input[0..<end]
            input = []
            scanned = 0
            onLine?(line)
            if closing { return }
        }
        if let onEnd { onEnd() } else { close() }
    }

    private func lineTooLong() {
        tooLong = true
        input = []
        scanned = 0
        if reading {
            reading = false
            uv_read_stop(handle)
        }
        onLineTooLong?()
    }

    // MARK: - Writing

    /// Queues bytes; they leave with everything else written in this loop iteration.
    public func write(_ bytes: [UInt8]) {
        guard !closing, !bytes.isEmpty else { return }
        outgoing.append(contentsOf: bytes)
        scheduleFlush()
    }

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        let me = LoopBound(self, loop: loop)  // keeps the connection alive until the flush
        loop.execute {
            let connection = me.value
            connection.flushScheduled = false
            connection.flush()
        }
    }

    /// Offers what is queued to the kernel now instead of at the end of the
    /// loop turn, so ``queuedBytes`` then counts only what the peer has not
    /// taken: a burst written in one turn to a peer that reads is no backlog.
    /// Loop thread only. A drain it completes is reported (``onDrain``) on a
    /// later turn, never from inside the caller.
    public func flushNow() {
        flush(reportDrainLater: true)
    }

    private func flush(reportDrainLater: Bool = false) {
        guard !closing || closeWhenFlushed, inFlight == 0, !outgoing.isEmpty else { return }
        if handleClosed { return }
        var written = 0
        outgoing.withUnsafeMutableBytes { raw in
            var buf = uv_buf_init(raw.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(raw.count))
            let n = uv_try_write(handle, &buf, 1)
            if n > 0 { written = Int(n) }
            else if n < 0 && n != UV_EAGAIN.rawValue { written = -1 }
        }
        if written < 0 {
            closeNow()
            return
        }
        if written == outgoing.count {
            outgoing.removeAll(keepingCapacity: outgoing.capacity <= 1 << 20)
            if reportDrainLater {
                let me = LoopBound(self, loop: loop)
                loop.execute { if me.value.queuedBytes == 0 { me.value.drained() } }
            } else {
                drained()
            }
            return
        }
        // The kernel took part: the rest goes with uv_write from a copy it owns.
        let rest = outgoing.count - written
        let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: rest)
        outgoing.withUnsafeBufferPointer { copy.initialize(from: $0.baseAddress! + written, count: rest) }
        outgoing.removeAll(keepingCapacity: true)
        inFlight = rest
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = UnsafeMutableRawPointer(copy)
        var buf = uv_buf_init(UnsafeMutableRawPointer(copy).assumingMemoryBound(to: CChar.self), UInt32(rest))
        let status = uv_write(request, handle, &buf, 1) { request, status in
            let copy = request!.pointee.data
            let stream = request!.pointee.handle!
            copy?.deallocate()
            request!.deallocate()
            let me = Unmanaged<StreamConnection>.fromOpaque(stream.pointee.data).takeUnretainedValue()
            me.inFlight = 0
            if status < 0 {
                me.closeNow()
            } else if me.outgoing.isEmpty {
                me.drained()
            } else {
                me.flush()
            }
        }
        if status < 0 {
            copy.deallocate()
            request.deallocate()
            inFlight = 0
            closeNow()
        }
    }

    private func drained() {
        if closeWhenFlushed {
            if lingering { shutDownAndLinger() } else { closeNow() }
            return
        }
        onDrain?()
    }

    // MARK: - Closing

    /// Closes once what is queued has been written. Idempotent.
    public func close() {
        guard !closing else { return }
        closing = true
        if reading {
            reading = false
            uv_read_stop(handle)
        }
        if queuedBytes == 0 {
            closeNow()
        } else {
            closeWhenFlushed = true
            if inFlight == 0 { scheduleFlush() }
        }
    }

    /// Closes once what is queued has been written, without losing it to a
    /// reset: the peer may still be sending (a line past ``maxLineBytes``),
    /// and closing a socket with unread input makes the kernel send a reset
    /// that can destroy the answer before the peer reads it. So the write side
    /// is shut down (FIN) and input is read and discarded until the peer
    /// closes too, or `timeoutMilliseconds` pass. Idempotent.
    public func closeAfterReading(timeoutMilliseconds: UInt64) {
        guard !closing else { return }
        lingering = true
        lingerMilliseconds = timeoutMilliseconds
        closing = true
        closeWhenFlushed = true
        if queuedBytes == 0 {
            shutDownAndLinger()
        } else if inFlight == 0 {
            scheduleFlush()
        }
    }

    private func shutDownAndLinger() {
        let timer = LoopTimer(loop: loop)
        lingerTimer = timer
        timer.start(afterMilliseconds: lingerMilliseconds) { [unowned self] in closeNow() }
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        if uv_shutdown(request, handle, { request, _ in request!.deallocate() }) < 0 {
            request.deallocate()
            closeNow()
            return
        }
        startReading()  // until EOF (closeNow) or the timer
    }

    /// Closes at once, dropping what is queued. Idempotent.
    public func closeNow() {
        closing = true
        closeWhenFlushed = false
        outgoing = []
        lingerTimer?.close()
        lingerTimer = nil
        guard !handleClosed else { return }
        handleClosed = true
        uv_close(uvHandle(handle)) { handle in
            let me = Unmanaged<StreamConnection>.fromOpaque(handle!.pointee.data).takeRetainedValue()
            me.readBuffer?.deallocate()
            me.readBuffer = nil
            handle!.deallocate()
            let onClose = me.onClose
            me.onClose = nil
            me.onLine = nil
            me.onLineTooLong = nil
            me.onDrain = nil
            me.onEnd = nil
            onClose?()
        }
    }
}
