import Foundation
import HydraCore
import HydraHTTP
import HydraLoop

/// A GET request routed by the REST manager for another manager on the same
/// worker (the resource manager): the HTTP request with the configuration's
/// headers, TLS and timeout options, and the job's retry policy and `expect`.
public struct RoutedRequest: Sendable {
    public var http: HTTPRequest
    public var retry: RetryPolicy
    /// The statuses that count as success; nil: 2xx.
    public var expect: [Int]?
    /// The request's credential texts (rest.md §1): never in a result, so
    /// masked in content a result carries.
    public var secrets: [String] = []
    /// The OAuth2 session whose token each attempt carries (rest.md §1), if
    /// any: see ``RESTManager/token(of:on:client:_:)`` and ``RESTManager/rejected(_:of:)``.
    public var authSession: String?

    /// Whether a failure is worth another attempt (network, timeout, 5xx, 429), as for remote jobs.
    public static func isRetryable(_ error: JobError) -> Bool { RESTExecutor.isRetryable(error) }

    /// The wait a response's `Retry-After` asks for before the next attempt
    /// (protocol §4), as for remote jobs: within the retry ceiling; nil when
    /// the response has none, or one that is neither seconds nor a date.
    public static func retryAfterMilliseconds(_ response: HTTPResponse) -> Int? {
        response.header("retry-after").flatMap { RetryAfter.milliseconds($0) }
    }
}

extension RESTManager {
    /// The connection pool of `worker`, shared by every manager on it (made on first use).
    /// Worker's loop thread.
    public static func httpClient(on worker: WorkerContext) -> HTTPClient {
        worker.services.object("http-client") {
            HTTPClient(loop: worker.loop, options: HTTPPoolOptions(
                maxConnections: worker.configuration.maxConnections,
                maxHostConnections: worker.configuration.maxHostConnections))
        }
    }

    /// Checks the address and transfer fields of `request` as a remote job's
    /// (route names, path variables, headers), naming fields under `path`.
    public func validateRequest(_ request: RemoteSpec, path: String) throws(ValidationError) {
        try validate(JobSpec(.remote(request)), path: path)
    }

    /// Routes `spec` (references resolved) as a GET: exactly what a remote job would send.
    public func routeGET(_ spec: RemoteSpec, timeoutMs: Int?) throws(JobError) -> RoutedRequest {
        var spec = spec
        spec.method = "GET"
        spec.body = nil
        spec.saveAs = nil
        let prepared = try resolver.prepare(spec, timeoutMs: timeoutMs)
        return RoutedRequest(http: prepared.http, retry: prepared.retry, expect: prepared.expect, secrets: prepared.secrets,
                             authSession: prepared.authSession)
    }

    /// The token of OAuth2 session `name` for one attempt of a request routed
    /// here: `body` runs at once when the session holds a fresh token, else
    /// once the session's one token request in flight (started on `client`
    /// when none is) answers; a failure has kind `auth`. `body` runs on
    /// `loop`, which must be the calling thread's (a worker's).
    public func token(of name: String, on loop: EventLoop, client: HTTPClient,
                      _ body: @escaping (Result<String, JobError>) -> Void) {
        guard let session = sessions.session(name) else {
            body(.failure(JobError(.invalid, "auth: unknown auth '\(name)'")))
            return
        }
        session.withToken(on: loop, send: RESTManager.sender(client), body)
    }

    /// A `401` answered a request that carried `token` of session `name`:
    /// true when the request may be sent once more with another token (the
    /// session can get one by itself), as a remote job is (rest.md §1).
    public func rejected(_ token: String, of name: String) -> Bool {
        sessions.session(name)?.reject(token) ?? false
    }
}

/// A file being written in the state folder for another manager (the
/// resource repository's copies), the way a `saveAs` download is: a
/// temporary file next to its target, put in place by ``commit()`` only, so
/// a reader never finds it half-written; folders walked with `O_NOFOLLOW`.
/// Owned and used by one loop thread; discarded when dropped uncommitted.
public final class StateFileWriter {
    private let file: DownloadFile

    fileprivate init(_ file: DownloadFile) { self.file = file }

    /// The open temporary file (for ``HydraHTTP/HTTPRequest/saveToFile``).
    public var descriptor: Int32 { file.descriptor }

    /// The file's identity (its inode), the same once renamed into place; nil if it cannot be read.
    public var fileID: UInt64? {
        var info = stat()
        return fstat(file.descriptor, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    /// Renames the temporary file over the target. Throws kind `invalid`.
    public func commit() throws(JobError) { try file.commit() }

    /// Removes the temporary file. Idempotent.
    public func discard() { file.discard() }

    /// What was written so far, for another thread to read back (a digest, a
    /// copy in memory) while this writer waits: it must stay open, and
    /// unwritten, until that thread is done.
    public var written: StateFileContents { StateFileContents(descriptor: file.descriptor) }
}

/// The bytes of a ``StateFileWriter``'s temporary file, read back from its
/// start without moving its write position. Any one thread at a time.
public struct StateFileContents: Sendable {
    fileprivate let descriptor: Int32

    /// Calls `body` with the file's bytes in order, in pieces of up to 1 MiB.
    /// Blocking file I/O. Throws kind `invalid` naming the reason.
    public func forEachPiece(_ body: (ArraySlice<UInt8>) -> Void) throws(JobError) {
        let capacity = min(max(try size(), 4096), 1 << 20)
        var buffer = [UInt8](unsafeUninitializedCapacity: capacity) { _, count in count = capacity }
        var offset: off_t = 0
        while true {
            let n = try read(into: &buffer, from: 0, at: offset)
            if n == 0 { return }
            body(buffer[0..<n])
            offset += off_t(n)
        }
    }

    /// Moves the bytes after the first `count` to the start of the file and
    /// cuts it there: a whole body that a server sent in answer to `Range`
    /// went after the bytes kept from before (see
    /// ``HydraHTTP/HTTPRequest/resumeFileAt``). Blocking file I/O; the writer
    /// waits meanwhile, as for any reader. Throws kind `invalid`.
    public func dropFirst(_ count: Int) throws(JobError) {
        let total = try size()
        guard count > 0, count <= total else { return }
        var buffer = [UInt8](repeating: 0, count: min(max(total - count, 1), 1 << 20))
        var moved = 0
        while moved < total - count {
            let n = try read(into: &buffer, from: 0, at: off_t(count + moved))
            guard n > 0 else { throw JobError(.invalid, "a file being stored shrank while it was moved") }
            var written = 0
            while written < n {
                let w = buffer.withUnsafeBytes { pwrite(descriptor, $0.baseAddress! + written, n - written, off_t(moved + written)) }
                if w < 0 && errno == EINTR { continue }
                guard w > 0 else { throw failure() }
                written += w
            }
            moved += n
        }
        guard ftruncate(descriptor, off_t(moved)) == 0 else { throw failure() }
    }

    /// Reads the whole file into `bytes`, which must have the file's size
    /// (the caller allocates it where it will be kept and freed, and no piece
    /// buffer is needed beside it). Blocking file I/O.
    public func read(into bytes: inout [UInt8]) throws(JobError) {
        guard try size() == bytes.count else { throw JobError(.invalid, "a file being stored changed size while it was read back") }
        var done = 0
        while done < bytes.count {
            let n = try read(into: &bytes, from: done, at: off_t(done))
            guard n > 0 else { throw JobError(.invalid, "a file being stored shrank while it was read back") }
            done += n
        }
    }

    private func size() throws(JobError) -> Int {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw failure() }
        return Int(info.st_size)
    }

    /// One `pread` into `buffer[start...]` (not zeroed first: pread fills what it reads), retried on EINTR.
    private func read(into buffer: inout [UInt8], from start: Int, at offset: off_t) throws(JobError) -> Int {
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + start, $0.count - start, offset) }
            if n >= 0 { return n }
            if errno != EINTR { throw failure() }
        }
    }

    private func failure() -> JobError {
        JobError(.invalid, "cannot read back a file being stored: \(String(cString: strerror(errno)))")
    }
}

extension RESTManager {
    /// Opens a temporary file for the state-folder file at `components` (a
    /// path the server owns). Blocking file I/O: the caller's thread. Throws kind `invalid`.
    public func openStateFile(_ components: [String]) throws(JobError) -> StateFileWriter {
        guard let path = SaveAsPath(owned: components) else {
            throw JobError(.invalid, "not a path inside the state folder: \(components.joined(separator: "/"))")
        }
        return StateFileWriter(try DownloadFile(path, stateDirectory: resolver.stateDirectory, field: "state.path"))
    }

    /// Writes `bytes` to the state-folder file at `components` through a
    /// temporary file (see ``StateFileWriter``). Blocking file I/O: the
    /// caller's thread. Throws kind `invalid`.
    /// Returns the file's identity (its inode; nil if it cannot be read).
    @discardableResult
    public func writeStateFile(_ components: [String], bytes: [UInt8]) throws(JobError) -> UInt64? {
        let file = try openStateFile(components)
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBufferPointer { buffer in
                Glibc.write(file.descriptor, buffer.baseAddress! + written, buffer.count - written)
            }
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                file.discard()
                throw JobError(.invalid, "cannot write \(components.joined(separator: "/")): \(String(cString: strerror(code)))")
            }
            written += n
        }
        let id = file.fileID
        try file.commit()
        return id
    }
}
