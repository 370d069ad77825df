import CCurl
import Foundation

/// One curl easy handle and the request running on it. Loop thread only.
///
/// Reused: when a request completes the client keeps the transfer for the
/// next one. The easy handle keeps its connection, DNS and TLS session state,
/// and the options the next request shares with the last one (its ``Shape``)
/// are not set again: for a stream of similar requests only the URL changes.
///
/// Ownership: the client's tables hold it (active or idle); curl's callbacks
/// reach it through an unretained pointer that is valid while it is in them.
final class Transfer {
    let easy: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// The client, for curl's open/close-socket callbacks (see ``HTTPClient``).
    private let clientPointer: UnsafeMutableRawPointer
    /// The client's parsed URLs (see ``ParsedURL``).
    private let urls: ParsedURLCache

    // The request in flight (reset by `end`).
    @exclusivity(unchecked) private(set) var id: UInt64 = 0
    @exclusivity(unchecked) private(set) var completion: HTTPClient.Completion?
    @exclusivity(unchecked) private(set) var progress: HTTPClient.Progress?
    /// The request, when the client follows its redirects (``HTTPRequest/followsRedirectsItself``).
    @exclusivity(unchecked) var following: HTTPRequest?
    /// Redirects the client followed for this request so far (kept across ``end()``
    /// by ``HTTPClient`` from one hop to the next).
    @exclusivity(unchecked) var hops = 0
    /// The file the body streams to (the caller's descriptor; never closed here).
    @exclusivity(unchecked) private var file: Int32?
    /// The body is bound for a file (``HTTPRequest/isBoundForFile``): ``file``,
    /// or the one ``spillFile`` opens when a spooled body spills.
    @exclusivity(unchecked) private var fileBound = false
    @exclusivity(unchecked) private(set) var spillFile: HTTPClient.SpillFile?
    @exclusivity(unchecked) private var headers = HeaderLines()
    @exclusivity(unchecked) private var body: [UInt8] = []
    @exclusivity(unchecked) private var bodyBytes = 0
    @exclusivity(unchecked) private var fileError: String?
    /// The request's ``HTTPRequest/spoolBytes`` (0 when it resumes), and
    /// whether the body outgrew them (from then on it goes to ``file``).
    @exclusivity(unchecked) private var spoolLimit = 0
    @exclusivity(unchecked) private var spilled = false
    /// The streamed request body, read as curl asks (see ``HTTPBodyStream``).
    @exclusivity(unchecked) private var bodyReader: HTTPBodyReader?
    @exclusivity(unchecked) private var uploadError: String?
    /// The request's ``HTTPRequest/maxBodyBytes`` (`Int.max`: none) and whether it was passed.
    @exclusivity(unchecked) private var maxBodyBytes = Int.max
    @exclusivity(unchecked) private var tooLarge = false
    /// The response had a `Content-Length` that is not a number of bytes (or too
    /// large for one): curl 7.88 ignores it and reads to the close, so a cut
    /// body would pass for a whole one. The transfer stops instead.
    @exclusivity(unchecked) private var badLength = false
    /// The request's ``HTTPRequest/diskReserve``; bytes written to the file since it was last checked;
    /// what the disk kept free when the transfer stopped for it.
    @exclusivity(unchecked) private var diskReserve = HTTPRequest.DiskReserve.none
    @exclusivity(unchecked) private var writtenSinceCheck = 0
    @exclusivity(unchecked) private var diskFull: (free: Int, reserve: Int)?
    /// The current response's `Content-Length` (-1: none) and whether it has a
    /// `Content-Encoding` (then the length counts encoded bytes, not what is kept).
    @exclusivity(unchecked) private var declaredLength = -1
    @exclusivity(unchecked) private var encoded = false
    /// The blank line that ends the current response's headers arrived: curl
    /// 7.88 calls a response cut inside its headers a success (status 200, no
    /// headers, no body), which must not pass for one.
    @exclusivity(unchecked) private var headersEnded = false
    /// ``configure(_:)`` refused the URL (a NUL in it).
    @exclusivity(unchecked) private var rejectedURL = false
    /// The name of a malformed header field ``configure(_:)`` refused, for the error.
    @exclusivity(unchecked) private var rejectedHeader: String?
    /// When progress was last reported, per direction (`UInt64.max`: the last report is out).
    @exclusivity(unchecked) private var lastUpload: UInt64 = 0
    @exclusivity(unchecked) private var lastDownload: UInt64 = 0
    /// The response body is kept in memory and its progress is wanted (reported from ``receive(_:_:)``).
    @exclusivity(unchecked) private var reportsMemoryProgress = false

    // What is set on the easy handle now.
    @exclusivity(unchecked) private var applied: AppliedShape?
    /// The client's count of closed sockets when this request started (see ``HTTPClient``'s `complete`).
    @exclusivity(unchecked) var socketsClosedAtStart: UInt64 = 0
    /// `curl_easy_reset` before the next request, whatever its shape (see ``resetBeforeNextUse()``).
    @exclusivity(unchecked) private var needsReset = false
    @exclusivity(unchecked) private var appliedURL = ""
    /// The parsed URL the easy handle points at (`CURLOPT_CURLU`): kept alive while it does.
    @exclusivity(unchecked) private var appliedParsedURL: ParsedURL?
    @exclusivity(unchecked) private var headerList: UnsafeMutablePointer<curl_slist>?

    /// The codings curl decodes for us (zlib's).
    private static let acceptedEncodings = "gzip, deflate"

    /// curl's receive buffer for bodies streamed to a file (see ``Shape/savesToFile``).
    static let fileBufferSize = 64 << 10

    /// The options of a request other than its URL and body bytes.
    private struct Shape: Equatable {
        var method: String
        var hasBody: Bool
        var streamsBody: Bool
        var headers: [HTTPHeader]
        var timeoutMilliseconds: Int?
        var connectTimeoutMilliseconds: Int?
        var maxRedirects: Int
        var verifyTLS: Bool
        var caFile: String?
        var pinnedPublicKey: String?
        var clientCert: String?
        var clientKey: String?
        var proxy: String?
        var acceptEncoding: Bool
        var pipeWait: Bool
        /// curl's progress callback is on: for request bodies and bodies saved
        /// to a file. An in-memory response reports its progress from the write
        /// callback instead (see ``receive(_:_:)``): most are small, and curl
        /// calls its progress callback on every pass over a transfer (~1k
        /// instructions per request in all).
        var reportsProgress: Bool
        /// The body goes to a file: read in larger pieces (fewer receive and write calls).
        var savesToFile: Bool

        init(_ request: HTTPRequest, reportsProgress: Bool) {
            method = request.method
            hasBody = request.body != nil || request.bodyStream != nil
            streamsBody = request.bodyStream != nil
            headers = request.headers
            timeoutMilliseconds = request.timeoutMilliseconds
            connectTimeoutMilliseconds = request.connectTimeoutMilliseconds
            maxRedirects = request.curlRedirects
            verifyTLS = request.verifyTLS
            caFile = request.caFile
            pinnedPublicKey = request.pinnedPublicKey
            clientCert = request.clientCert
            clientKey = request.clientKey
            proxy = request.proxy
            acceptEncoding = request.acceptEncoding
            pipeWait = URLScheme(of: request.url) == .https
            savesToFile = request.isBoundForFile
            self.reportsProgress = Shape.curlReportsProgress(request, reportsProgress)
        }

        /// Whether `request` has this shape: what `Shape(request, …) == self`
        /// says, without building one (the common case on a busy worker is a
        /// stream of requests of one shape, each compared to the last).
        func matches(_ request: HTTPRequest, reportsProgress wanted: Bool) -> Bool {
            let requestHasBody = request.body != nil || request.bodyStream != nil
            return method == request.method && hasBody == requestHasBody && streamsBody == (request.bodyStream != nil)
                && timeoutMilliseconds == request.timeoutMilliseconds
                && connectTimeoutMilliseconds == request.connectTimeoutMilliseconds
                && maxRedirects == request.curlRedirects && verifyTLS == request.verifyTLS
                && acceptEncoding == request.acceptEncoding && savesToFile == request.isBoundForFile
                && reportsProgress == Shape.curlReportsProgress(request, wanted)
                && caFile == request.caFile && pinnedPublicKey == request.pinnedPublicKey
                && clientCert == request.clientCert && clientKey == request.clientKey && proxy == request.proxy
                && pipeWait == (URLScheme(of: request.url) == .https) && headers == request.headers
        }

        private static func curlReportsProgress(_ request: HTTPRequest, _ wanted: Bool) -> Bool {
            wanted && (request.body != nil || request.bodyStream != nil || request.isBoundForFile)
        }

    }

    /// The shape set on the easy handle, boxed: each request is compared with
    /// it in place (an optional ``Shape`` was copied out whole for the
    /// comparison, each of its strings and arrays retained and released:
    /// ~250 instructions per request).
    private final class AppliedShape {
        let shape: Shape
        init(_ shape: Shape) { self.shape = shape }
    }

    init(client: UnsafeMutableRawPointer, urls: ParsedURLCache) {
        guard let easy = curl_easy_init() else { fatalError("curl_easy_init failed") }
        self.easy = easy
        clientPointer = client
        self.urls = urls
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(to: 0)
    }

    deinit {
        curl_easy_cleanup(easy)
        if let list = headerList { curl_slist_free_all(list) }
        errorBuffer.deallocate()
    }

    /// Prepares the easy handle for `request`. On a throw nothing is left open.
    func begin(id: UInt64, _ request: HTTPRequest, completion: @escaping HTTPClient.Completion,
               progress: HTTPClient.Progress?, spillFile: HTTPClient.SpillFile? = nil) throws(HTTPFailure) {
        self.id = id
        self.completion = completion
        self.progress = progress
        self.spillFile = spillFile
        following = request.followsRedirectsItself ? request : nil
        errorBuffer[0] = 0
        if let file = request.saveToFile {
            // A retry writes the file afresh (no bytes of an earlier attempt remain), a resume
            // right after the bytes it keeps (the file cut there: nothing else stays).
            let offset = off_t(max(0, request.resumeFileAt ?? 0))
            let placed = ftruncate(file, offset) == 0 && lseek(file, offset, SEEK_SET) == offset
            guard placed else {
                let reason = String(cString: strerror(errno))
                end()
                throw HTTPFailure(.invalid, "cannot write the response body's file: \(reason)")
            }
            self.file = file
        }
        fileBound = request.isBoundForFile
        if fileBound { spoolLimit = (request.resumeFileAt ?? 0) > 0 ? 0 : max(0, request.spoolBytes) }
        maxBodyBytes = request.maxBodyBytes.map { max(0, $0) } ?? Int.max
        diskReserve = request.diskReserve
        reportsMemoryProgress = progress != nil && request.reportsProgress && !fileBound
        rejectedHeader = nil
        rejectedURL = false
        let code = configure(request)
        if code != CURLE_OK {
            applied = nil  // half set: start from a reset handle next time
            end()
            if rejectedURL { throw HTTPFailure(.invalid, "url: contains a NUL byte") }
            if let name = rejectedHeader {
                throw HTTPFailure(.invalid, "header \(name.debugDescription): a malformed name, or CR, LF or NUL in the value")
            }
            throw HTTPFailure(.invalid, "request option rejected: \(String(cString: curl_easy_strerror(code)))")
        }
    }

    /// The next request starts from `curl_easy_reset` (which also clears the
    /// handle's count of retries on dead connections) and sets every option anew.
    func resetBeforeNextUse() { needsReset = true }

    /// Forgets the finished request (its file stays open: it is the caller's); the options stay set.
    func end() {
        file = nil
        fileBound = false
        spillFile = nil
        completion = nil
        progress = nil
        following = nil
        hops = 0
        headers.removeAll()
        body = []
        bodyBytes = 0
        fileError = nil
        spoolLimit = 0
        spilled = false
        bodyReader = nil
        uploadError = nil
        maxBodyBytes = Int.max
        tooLarge = false
        badLength = false
        diskFull = nil
        writtenSinceCheck = 0
        declaredLength = -1
        encoded = false
        headersEnded = false
        lastUpload = 0
        lastDownload = 0
        reportsMemoryProgress = false
    }

    // MARK: - Options

    private func configure(_ request: HTTPRequest) -> CURLcode {
        var code = CURLE_OK
        func set(_ option: CURLoption, _ value: Int) { if code == CURLE_OK { code = hydra_easy_setopt_long(easy, option, value) } }
        func set(_ option: CURLoption, _ value: String) {
            if code == CURLE_OK { code = value.withCString { hydra_easy_setopt_str(easy, option, $0) } }
        }

        let wantsProgress = request.reportsProgress && progress != nil
        let same = !needsReset && applied?.shape.matches(request, reportsProgress: wantsProgress) == true
        // Debug builds (the tests) check that `matches` still covers every field of a shape.
        assert(needsReset || same == (applied?.shape == Shape(request, reportsProgress: wantsProgress)), "Shape.matches disagrees with Shape.==")
        if !same {
            let shape = Shape(request, reportsProgress: wantsProgress)
            // Checked here, once per new set of headers: a CR or LF in a field would
            // split it into lines of the peer's choosing (the layers above name the
            // field; this is the last line of defence).
            if let bad = shape.headers.first(where: { !$0.isWellFormed }) {
                rejectedHeader = bad.name
                return CURLE_BAD_FUNCTION_ARGUMENT
            }
            if applied != nil || headerList != nil || needsReset { curl_easy_reset(easy) }
            needsReset = false
            code = apply(shape)
            guard code == CURLE_OK else { return code }
            applied = AppliedShape(shape)
            appliedURL = ""
        }
        if request.url != appliedURL {
            // curl reads the URL as a C string: one with a NUL (from a reference) would end early there.
            if request.url.utf8.contains(0) {
                rejectedURL = true
                return CURLE_URL_MALFORMAT
            }
            // The parsed handle and its normalized text together (see ``ParsedURL``); a URL
            // curl's parser refuses goes as text alone, for curl to refuse with its own error.
            let parsed = urls.parsed(request.url)
            if code == CURLE_OK {
                code = hydra_easy_setopt_ptr(easy, CURLOPT_CURLU, parsed.map { UnsafeRawPointer($0.handle) })
            }
            // Released only now: the easy handle pointed at the one it replaces until the line above.
            appliedParsedURL = parsed
            set(CURLOPT_URL, parsed?.normalized ?? request.url)
            appliedURL = code == CURLE_OK ? request.url : ""
        }
        hydra_easy_setopt_ptr(easy, CURLOPT_PRIVATE, UnsafeRawPointer(bitPattern: UInt(id)))
        if let stream = request.bodyStream {
            bodyReader = HTTPBodyReader(stream)
            // -1: unknown (gzip on the way), sent chunked.
            if code == CURLE_OK { code = hydra_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(stream.length ?? -1)) }
        } else if let body = request.body {
            set(CURLOPT_POSTFIELDSIZE, body.count)
            body.withUnsafeBytes { raw in
                if code == CURLE_OK {
                    // COPYPOSTFIELDS: curl keeps its own copy for the transfer's lifetime.
                    code = hydra_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
                }
            }
        }
        return code
    }

    /// Sets every option of `shape` on a fresh or reset handle.
    private func apply(_ shape: Shape) -> CURLcode {
        var code = CURLE_OK
        func set(_ option: CURLoption, _ value: Int) { if code == CURLE_OK { code = hydra_easy_setopt_long(easy, option, value) } }
        func set(_ option: CURLoption, _ value: String) {
            if code == CURLE_OK { code = value.withCString { hydra_easy_setopt_str(easy, option, $0) } }
        }

        set(CURLOPT_NOSIGNAL, 1)
        if let proxy = shape.proxy {
            set(CURLOPT_PROXY, proxy)
            // An https proxy is verified like the server, against the same CA file when one is given.
            if let ca = shape.caFile { set(CURLOPT_PROXY_CAINFO, ca) }
            set(CURLOPT_PROXY_SSL_VERIFYPEER, shape.verifyTLS ? 1 : 0)
            set(CURLOPT_PROXY_SSL_VERIFYHOST, shape.verifyTLS ? 2 : 0)
        } else {
            // Only a configured proxy is used: "" tells curl not to read http_proxy and the
            // like from the environment (set once per request shape, not per request).
            set(CURLOPT_PROXY, "")
        }
        // Nor no_proxy/NO_PROXY: a configured proxy takes every request of its server
        // (curl 7.88 read them for each request, and a host listed there went around it).
        set(CURLOPT_NOPROXY, "")
        // curl's callbacks borrow the transfer (no retain per call): it stays
        // in the client's tables while curl can call them.
        let me = Unmanaged.passUnretained(self).toOpaque()
        hydra_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
        hydra_easy_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
            Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef { $0.receive(data!, size * count) }
        }
        hydra_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me)
        hydra_easy_setopt_data_cb(easy, CURLOPT_HEADERFUNCTION) { data, size, count, userdata in
            Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef { $0.receiveHeader(data!, size * count) }
        }
        hydra_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        hydra_easy_setopt_ptr(easy, CURLOPT_OPENSOCKETDATA, clientPointer)
        hydra_easy_setopt_opensocket_cb(easy) { client, _, address in
            HTTPClient.from(client!).openSocket(address!.pointee)
        }
        hydra_easy_setopt_ptr(easy, CURLOPT_CLOSESOCKETDATA, clientPointer)
        hydra_easy_setopt_closesocket_cb(easy) { client, socket in
            HTTPClient.from(client!).closeSocket(socket)
        }

        switch shape.method {
        case "GET": if shape.hasBody { set(CURLOPT_CUSTOMREQUEST, "GET") }
        case "HEAD": set(CURLOPT_NOBODY, 1)
        case "POST": set(CURLOPT_POST, 1)
        default: set(CURLOPT_CUSTOMREQUEST, shape.method)
        }
        if shape.streamsBody {
            // A body from the read callback: POST semantics (any method keeps its name above).
            if shape.method != "POST" { set(CURLOPT_POST, 1) }
            hydra_easy_setopt_ptr(easy, CURLOPT_READDATA, me)
            hydra_easy_setopt_data_cb(easy, CURLOPT_READFUNCTION) { data, size, count, userdata in
                Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef { $0.send(data!, size * count) }
            }
            hydra_easy_setopt_ptr(easy, CURLOPT_SEEKDATA, me)
            hydra_easy_setopt_seek_cb(easy) { userdata, offset, origin in
                Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue().rewind(offset, origin)
            }
        }
        if !shape.hasBody && shape.method == "POST" { set(CURLOPT_POSTFIELDSIZE, 0) }

        if let list = headerList { curl_slist_free_all(list); headerList = nil }
        var list: UnsafeMutablePointer<curl_slist>?
        for header in shape.headers {
            list = curl_slist_append(list, "\(header.name): \(header.value)")
        }
        if shape.acceptEncoding && !shape.headers.contains(where: { $0.hasName("accept-encoding") }) {
            // The same line CURLOPT_ACCEPT_ENCODING (set below, for decoding) would add;
            // given as a header, curl sends it as is. Its own line is formatted
            // anew for every request, byte by byte: ~3.5k instructions each.
            list = curl_slist_append(list, "Accept-Encoding: \(Transfer.acceptedEncodings)")
        }
        if shape.hasBody { list = curl_slist_append(list, "Expect:") }
        if !shape.hasBody && shape.method == "POST" && !shape.headers.contains(where: { $0.hasName("content-type") }) {
            // A POST without a body: curl would label the nothing it sends as a form.
            list = curl_slist_append(list, "Content-Type:")
        }
        headerList = list
        hydra_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)

        if let timeout = shape.timeoutMilliseconds, timeout > 0 { set(CURLOPT_TIMEOUT_MS, timeout) }
        if let timeout = shape.connectTimeoutMilliseconds, timeout > 0 { set(CURLOPT_CONNECTTIMEOUT_MS, timeout) }
        if shape.maxRedirects > 0 {
            set(CURLOPT_FOLLOWLOCATION, 1)
            set(CURLOPT_MAXREDIRS, shape.maxRedirects)
        }
        // http and https only, where a redirect points too (curl's default list for
        // redirects still has ftp: a redirect would fetch what a URL given at submit
        // is refused for).
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        if shape.acceptEncoding { set(CURLOPT_ACCEPT_ENCODING, Transfer.acceptedEncodings) }
        set(CURLOPT_SSL_VERIFYPEER, shape.verifyTLS ? 1 : 0)
        set(CURLOPT_SSL_VERIFYHOST, shape.verifyTLS ? 2 : 0)
        if let ca = shape.caFile { set(CURLOPT_CAINFO, ca) }
        if let pins = shape.pinnedPublicKey { set(CURLOPT_PINNEDPUBLICKEY, pins) }
        if let cert = shape.clientCert, let key = shape.clientKey {
            set(CURLOPT_SSLCERT, cert)
            set(CURLOPT_SSLCERTTYPE, "PEM")
            set(CURLOPT_SSLKEY, key)
            set(CURLOPT_SSLKEYTYPE, "PEM")
        }
        if shape.pipeWait { set(CURLOPT_PIPEWAIT, 1) }
        // Bodies written to disk are read in 64 KiB pieces (fewer receive and
        // write calls); in-memory responses keep curl's 16 KiB per handle.
        // 128 KiB was no faster and, at glibc's mmap threshold, cost the
        // 20,000-resource bench row 6 MiB of RSS.
        // libcurl 7.88 refuses a new size (CURLE_BAD_FUNCTION_ARGUMENT) on a handle
        // once taken off the multi while it waited for a connection slot (a job
        // cancelled or timed out then): it keeps that receive buffer for the handle's
        // life. The size is a speed-up only: such a handle keeps the size it has.
        if shape.savesToFile { _ = hydra_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, Transfer.fileBufferSize) }
        set(CURLOPT_TCP_NODELAY, 1)
        if shape.reportsProgress {
            set(CURLOPT_NOPROGRESS, 0)
            hydra_easy_setopt_ptr(easy, CURLOPT_XFERINFODATA, me)
            hydra_easy_setopt_xferinfo_cb(easy) { userdata, downloadTotal, downloaded, uploadTotal, uploaded in
                Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef { transfer in
                    transfer.reportProgress(upload: true, uploaded, uploadTotal)
                    if !transfer.reportsMemoryProgress { transfer.reportProgress(upload: false, downloaded, downloadTotal) }
                }
                return 0
            }
        }
        return code
    }

    // MARK: - curl callbacks

    /// Body bytes, after decoding: written to the file, or kept within `maxBodyBytes`.
    /// Returning less than `count` aborts the transfer (CURLE_WRITE_ERROR).
    private func receive(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        if fileBound {
            guard count <= maxBodyBytes - bodyBytes else {
                tooLarge = true
                return 0
            }
            if !spilled {
                // `bodyBytes <= spoolLimit` while nothing spilled: no overflow.
                if count <= spoolLimit - bodyBytes {
                    bodyBytes += count
                    data.withMemoryRebound(to: UInt8.self, capacity: count) {
                        body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count))
                    }
                    return count
                }
                guard spill() else { return 0 }
            }
            guard let file else { return 0 }  // (spill() opened it)
            bodyBytes += count
            guard Transfer.write(file, UnsafeRawPointer(data), count, error: &fileError) else { return 0 }
            writtenSinceCheck += count
            if writtenSinceCheck >= Transfer.diskCheckBytes, diskReserve != .none {
                writtenSinceCheck = 0
                if let full = Transfer.diskShortage(file, keeping: diskReserve) {
                    diskFull = full
                    return 0
                }
            }
        } else {
            // The first bytes of the final response: an unencoded body that says it is too
            // large is refused before any of it is kept. (Redirect bodies never come here.)
            if bodyBytes == 0 && !encoded && declaredLength > maxBodyBytes {
                tooLarge = true
                return 0
            }
            // Counted after decoding, so a compression bomb stops at the limit.
            guard count <= maxBodyBytes - bodyBytes else {
                tooLarge = true
                return 0
            }
            bodyBytes += count
            data.withMemoryRebound(to: UInt8.self, capacity: count) {
                body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count))
            }
            if reportsMemoryProgress {
                // Bytes as kept (decoded); the declared length counts them only when nothing was encoded.
                reportProgress(upload: false, curl_off_t(bodyBytes), encoded || declaredLength < 0 ? 0 : curl_off_t(declaredLength))
            }
        }
        return count
    }

    /// Moves a spooled body's bytes so far to the file (they outgrew
    /// ``HTTPRequest/spoolBytes``, or the transfer was cut and may be resumed),
    /// opening it through ``spillFile`` when the request gave none: from now on
    /// every byte goes there. False, with ``fileError``, when it cannot.
    private func spill() -> Bool {
        spilled = true
        if file == nil {
            guard let spillFile else {
                fileError = "no file to write the body to"
                return false
            }
            switch spillFile() {
            case .success(let opened):
                // Written from its start, like a `saveToFile`: what an earlier hop or attempt
                // spilled there (a redirect's body the client followed itself) must not stay.
                guard ftruncate(opened, 0) == 0 && lseek(opened, 0, SEEK_SET) == 0 else {
                    fileError = String(cString: strerror(errno))
                    return false
                }
                file = opened
            case .failure(let failure):
                fileError = failure.message
                return false
            }
        }
        guard let file, !body.isEmpty else { return true }
        let written = body.withUnsafeBytes { Transfer.write(file, $0.baseAddress!, $0.count, error: &fileError) }
        body = []
        return written
    }

    /// How many bytes a download writes between two looks at its disk's free space.
    static let diskCheckBytes = 8 << 20

    /// The disk's free bytes and the reserve, when writing on would leave less
    /// than `reserve` free on the disk holding `file`; nil otherwise (or when
    /// the disk cannot tell).
    private static func diskShortage(_ file: Int32, keeping reserve: HTTPRequest.DiskReserve) -> (free: Int, reserve: Int)? {
        var disk = statvfs()
        guard fstatvfs(file, &disk) == 0 else { return nil }
        // (Blocks times their size: bytes, saturating far beyond any disk.)
        func bytes(_ blocks: UInt) -> Int {
            let (product, overflow) = UInt64(blocks).multipliedReportingOverflow(by: UInt64(disk.f_frsize))
            return overflow ? Int.max : Int(clamping: product)
        }
        let free = bytes(disk.f_bavail)
        let total = bytes(disk.f_blocks)
        let keep = reserve.bytes(ofDisk: total)
        return free - diskCheckBytes < keep ? (free, keep) : nil
    }

    /// Writes `count` bytes at `file`'s position, retrying short writes and
    /// EINTR. False, with the reason in `error`, when it cannot.
    private static func write(_ file: Int32, _ data: UnsafeRawPointer, _ count: Int, error: inout String?) -> Bool {
        var written = 0
        while written < count {
            let n = Glibc.write(file, data + written, count - written)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                error = String(cString: strerror(errno))
                return false
            }
            written += n
        }
        return true
    }

    /// The next bytes of a streamed request body; `CURL_READFUNC_ABORT` on a failure.
    private func send(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        guard let reader = bodyReader else { return 0 }
        let n = reader.read(into: UnsafeMutableRawBufferPointer(start: data, count: count))
        guard n >= 0 else {
            uploadError = reader.failure
            return Int(CURL_READFUNC_ABORT)
        }
        return n
    }

    /// Back to the body's start when curl sends it again (a redirect, an auth
    /// round): the only seek a stream allows.
    private func rewind(_ offset: curl_off_t, _ origin: Int32) -> Int32 {
        guard let reader = bodyReader, offset == 0, origin == SEEK_SET else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
        reader.rewind()
        return Int32(CURL_SEEKFUNC_OK)
    }

    /// One header line (curl passes them whole, CRLF included), kept as bytes.
    private func receiveHeader(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        data.withMemoryRebound(to: UInt8.self, capacity: count) { start in
            let line = UnsafeBufferPointer(start: start, count: count)
            if count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
               line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/") {
                // A new response (after a redirect or a 100 Continue): forget the previous headers.
                headers.removeAll()
                declaredLength = -1
                encoded = false
                headersEnded = false
                return
            }
            if count <= 2 && (line[0] == UInt8(ascii: "\r") || line[0] == UInt8(ascii: "\n")) {
                headersEnded = true
                return
            }
            switch headers.append(line: line) {
            case .contentEncoding:
                if Transfer.isContentEncoding(line) { encoded = true }
            case .contentLength:
                let declared = Transfer.contentLength(line)
                if declared == nil {
                    badLength = true
                } else if !fileBound, let length = declared {
                    declaredLength = length
                    // Room for the whole body at once, within the limit (a peer's number: bounded).
                    if length > 0 && length <= maxBodyBytes { body.reserveCapacity(min(length, 64 << 20)) }
                } else if spoolLimit > 0, !spilled, let length = declared, length > 0, length <= spoolLimit {
                    body.reserveCapacity(length)  // a body that will be spooled, in one allocation
                }
            case .contentType, nil:
                break
            }
        }
        return badLength ? 0 : count
    }

    /// True for a `Content-Encoding` line (see ``HeaderLines/append(line:)``) with a coding other than `identity`.
    private static func isContentEncoding(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        let value = UnsafeBufferPointer(rebasing: line[HTTPHeaderBlock.valueRange(line, after: 17)])
        return !value.isEmpty && !(value.count == 8 && HTTPHeaderBlock.hasName(value, "identity"))
    }

    /// The value of a `Content-Length` line (see ``HeaderLines/append(line:)``), else nil.
    private static func contentLength(_ line: UnsafeBufferPointer<UInt8>) -> Int? {
        var value = 0, digits = 0
        for i in 15..<line.count {
            let b = line[i]
            if b >= 0x30 && b <= 0x39 {
                guard digits < 18 else { return nil }
                value = value * 10 + Int(b - 0x30)
                digits += 1
            } else if b != 0x20 && b != 0x09 && b != 0x0D && b != 0x0A {
                return nil
            }
        }
        return digits > 0 ? value : nil
    }

    /// One direction's progress (from curl's progress callback, or the write
    /// callback for an in-memory response): reported when the
    /// transfer is large enough (a file download always), at most ten times a
    /// second, plus once more when that direction completes.
    private func reportProgress(upload: Bool, _ now: curl_off_t, _ total: curl_off_t) {
        guard let progress, now > 0 else { return }
        let last = upload ? lastUpload : lastDownload
        guard last != UInt64.max else { return }
        guard (!upload && fileBound) || now >= HTTPProgress.threshold || total >= HTTPProgress.threshold else { return }
        let time = DispatchTime.now().uptimeNanoseconds
        let finished = total > 0 && now >= total
        guard finished || time - last >= 100_000_000 else { return }
        if upload { lastUpload = finished ? UInt64.max : time } else { lastDownload = finished ? UInt64.max : time }
        progress(HTTPProgress(upload: upload, bytes: Int64(now), totalBytes: total > 0 ? Int64(total) : nil))
    }

    /// `text` with the proxy URL's credentials (its `user:password@` part,
    /// or `user@`) replaced by `***` wherever they appear: the whole part,
    /// then the password alone and the user name alone (as written and
    /// percent-decoded, as curl may quote either), the user name when it has
    /// 4 characters or more (a shorter one would mask unrelated text).
    static func masking(_ proxy: String, in text: String) -> String {
        // The last `@` of the authority ends the credentials (as curl and the configuration read them).
        guard let schemeEnd = proxy.range(of: "://") else { return text }
        let authority = proxy[schemeEnd.upperBound...].prefix { $0 != "/" }
        guard let at = authority.lastIndex(of: "@") else { return text }
        let credentials = String(proxy[schemeEnd.upperBound..<at])
        guard !credentials.isEmpty else { return text }
        let user: String, password: String
        if let colon = credentials.firstIndex(of: ":") {
            user = String(credentials[..<colon])
            password = String(credentials[credentials.index(after: colon)...])
        } else {
            (user, password) = (credentials, "")
        }
        var secrets = [credentials, credentials.removingPercentEncoding ?? credentials]
        for (part, minimum) in [(password, 1), (user, 4)] where part.count >= minimum {
            secrets += [part, part.removingPercentEncoding ?? part]
        }
        var out = text
        for secret in secrets where !secret.isEmpty && out.contains(secret) {
            out = out.replacingOccurrences(of: secret, with: "***")
        }
        return out
    }

    // MARK: - Results

    /// The outcome of a transfer curl ended with `code`.
    func outcome(_ code: CURLcode) -> Result<HTTPResponse, HTTPFailure> {
        guard code == CURLE_OK else { return .failure(failure(for: code)) }
        guard headersEnded else { return .failure(HTTPFailure(.network, "the connection closed inside the response's headers")) }
        endUploadProgress()
        return .success(response())
    }

    /// A streamed body of unknown size (gzip-compressed on the way out) never
    /// reaches a total curl knows, so its reports never said it ended: once
    /// the transfer succeeded, one last report gives the body's bytes sent
    /// (without the chunked framing curl's own count includes).
    private func endUploadProgress() {
        guard progress != nil, let bodyReader, lastUpload != UInt64.max else { return }
        let sent = curl_off_t(bodyReader.handedOut)
        reportProgress(upload: true, sent, sent)
    }

    func response() -> HTTPResponse {
        var status = 0
        hydra_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var response = HTTPResponse(status: status, headers: headers.block, body: Transfer.fitted(body), bodyBytes: bodyBytes)
        response.isSpooled = fileBound && !spilled && spoolLimit > 0
        // The effective URL is copied only when a redirect made it differ: most responses need no string.
        var redirects = 0
        hydra_easy_getinfo_long(easy, CURLINFO_REDIRECT_COUNT, &redirects)
        if redirects > 0 || hops > 0 {
            var pointer: UnsafeMutableRawPointer?
            hydra_easy_getinfo_ptr(easy, CURLINFO_EFFECTIVE_URL, &pointer)
            response.redirectedURL = pointer.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) }
        }
        return response
    }

    /// `body`, in a buffer of about its size: room reserved for a declared
    /// `Content-Length` that was not the decoded size (a peer's number: a
    /// gzip body may decode to far less), or left by growth, would otherwise
    /// stay behind every kept copy of it (a result, the memory tier), unaccounted.
    static func fitted(_ body: [UInt8]) -> [UInt8] {
        guard body.capacity - body.count > max(4096, body.count / 4) else { return body }
        return [UInt8](unsafeUninitializedCapacity: body.count) { buffer, count in
            _ = buffer.initialize(from: body)
            count = body.count
        }
    }

    /// What a redirect the client follows itself asks for next: nothing (the
    /// response is the answer), the next request, or a refusal.
    enum RedirectHop {
        case none
        case follow(HTTPRequest)
        case refuse(HTTPFailure)
    }

    /// The redirect of the response just completed, for a request the client
    /// follows itself: as curl would follow it (the method becomes GET after a
    /// 303, and after a 301 or 302 of a POST; 307 and 308 keep method and
    /// body), http and https only, and without the origin-bound headers (nor
    /// `Authorization` and `Cookie`) once it leaves the request's origin. From
    /// there on curl follows the rest: nothing is left to keep back.
    func redirectHop() -> RedirectHop {
        guard var next = following else { return .none }
        var status = 0
        hydra_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        guard [301, 302, 303, 307, 308].contains(status) else { return .none }
        var pointer: UnsafeMutableRawPointer?
        hydra_easy_getinfo_ptr(easy, CURLINFO_REDIRECT_URL, &pointer)
        guard let pointer else { return .none }
        let target = String(cString: pointer.assumingMemoryBound(to: CChar.self))
        guard URLScheme(of: target) != nil else {
            return .refuse(HTTPFailure(.invalid, "a redirect to a URL that is not http:// or https:// was not followed"))
        }
        guard next.maxRedirects > 0 else {
            // As curl ends a chain longer than CURLOPT_MAXREDIRS (CURLE_TOO_MANY_REDIRECTS).
            return .refuse(HTTPFailure(Transfer.kind(of: CURLE_TOO_MANY_REDIRECTS), "Maximum (\(hops)) redirects followed"))
        }
        // 307 and 308 send the body again: a streamed one is read anew from its first byte.
        let keepsBody = status == 307 || status == 308
        if status == 303 ? next.method != "HEAD" : (!keepsBody && next.method == "POST") {
            next.method = "GET"
            next.body = nil
            next.bodyStream = nil
            next.headers.removeAll { $0.hasName("content-type") || $0.hasName("content-length") }
        }
        if Transfer.origin(of: target) != Transfer.origin(of: next.url) {
            let bound = Set(next.originBoundHeaders + ["authorization", "cookie"])
            next.headers.removeAll { bound.contains($0.name.lowercased()) }
            next.originBoundHeaders = []
        }
        next.url = target
        next.maxRedirects -= 1
        return .follow(next)
    }

    /// `scheme://host:port` of an absolute URL, lowercased, the port made explicit.
    static func origin(of url: String) -> String? {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(),
              let host = parts.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(parts.port ?? (scheme == "https" ? 443 : 80))"
    }

    func failure(for code: CURLcode) -> HTTPFailure {
        if tooLarge {
            return HTTPFailure(.tooLarge, "the response body is larger than \(maxBodyBytes) bytes (counted after decoding)")
        }
        if let fileError { return HTTPFailure(.invalid, "cannot write the response body: \(fileError)") }
        if badLength { return HTTPFailure(.network, "the response's Content-Length is not a number of bytes") }
        if let diskFull {
            return HTTPFailure(.diskFull, "the download stopped: its disk has \(diskFull.free) bytes free and keeps \(diskFull.reserve) (state.minFreeBytes)")
        }
        if let uploadError { return HTTPFailure(.invalid, uploadError) }
        var detail = String(cString: errorBuffer)
        if detail.isEmpty { detail = String(cString: curl_easy_strerror(code)) }
        if let proxy = applied?.shape.proxy { detail = Transfer.masking(proxy, in: detail) }
        // Errors never carry the server's file system paths (protocol.md §2): curl's
        // message names the file it could not use; the field name stands in for it.
        for (path, field) in [(applied?.shape.caFile, "caFile"), (applied?.shape.clientCert, "clientCert"), (applied?.shape.clientKey, "clientKey")] {
            if let path { detail = Transfer.replacingPath(path, with: "(" + field + ")", in: detail) }
        }
        if code == CURLE_PARTIAL_FILE || code == CURLE_RECV_ERROR, !encoded, bodyBytes > 0 {
            // Cut mid-body: the bytes so far (in memory, or in the file) may be resumed with a Range request.
            // A spooled body's bytes so far go to the file, where a resume expects them.
            if fileBound, !spilled, !spill(), let fileError {
                return HTTPFailure(.invalid, "cannot write the response body: \(fileError)")
            }
            var status = 0
            hydra_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
            var failure = HTTPFailure(.network, detail)
            failure.partial = HTTPResponse(status: status, headers: headers.block, body: body, bodyBytes: bodyBytes)
            return failure
        }
        if code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR {
            if Transfer.isTLSAlert(detail) { return HTTPFailure(.tls, detail) }
            if refusedAfterHandshake() {
                return HTTPFailure(.tls, detail + " (the server closed the new TLS connection before answering: "
                                   + "it may require a client certificate, see clientCert/clientKey)")
            }
        }
        return HTTPFailure(Transfer.kind(of: code), detail)
    }

    /// `text` with each occurrence of `path` that stands alone (not inside a
    /// longer word or path: `cert` is not replaced in `certificate`) replaced.
    static func replacingPath(_ path: String, with replacement: String, in text: String) -> String {
        guard !path.isEmpty, text.contains(path) else { return text }
        // Before: any path character. After: not a '.', which may end a sentence.
        func continues(_ c: Character, dot: Bool) -> Bool { c.isLetter || c.isNumber || "/_-~".contains(c) || (dot && c == ".") }
        var out = ""
        var rest = Substring(text)
        while let range = rest.range(of: path) {
            let before = range.lowerBound == rest.startIndex ? (out.last ?? " ") : rest[rest.index(before: range.lowerBound)]
            let after = range.upperBound == rest.endIndex ? " " : rest[range.upperBound]
            out += rest[..<range.lowerBound]
            out += continues(before, dot: true) || continues(after, dot: false) ? String(rest[range]) : replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }

    /// A TLS alert in curl's reason (OpenSSL's `tlsv13 alert certificate
    /// required`, `sslv3 alert bad certificate`): the peer refused the
    /// handshake, whatever curl's code says (rest.md §7: kind `tls`).
    static func isTLSAlert(_ reason: String) -> Bool {
        reason.contains("tlsv13 alert") || reason.contains("tlsv1 alert") || reason.contains("sslv3 alert")
    }

    /// A server that demands a client certificate refuses one that was not
    /// sent; with TLS 1.3 the client learns it only when it writes or reads
    /// next, and when the server's reset overtakes its alert curl reports a
    /// bare send or receive error. Judged a TLS refusal: an `https` request
    /// without `clientCert` whose *new* connection (opened for this transfer;
    /// a reused keep-alive connection the server closed stays `network`)
    /// completed its handshake and then failed before any byte of a response.
    private func refusedAfterHandshake() -> Bool {
        guard let shape = applied?.shape, shape.pipeWait, shape.clientCert == nil, headers.isEmpty, bodyBytes == 0 else { return false }
        var status = 0, connects = 0
        var handshake: curl_off_t = 0
        hydra_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        hydra_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        hydra_easy_getinfo_off(easy, CURLINFO_APPCONNECT_TIME_T, &handshake)
        return status == 0 && connects > 0 && handshake > 0
    }

    /// The failure kind of a curl error: every TLS error code libcurl 7.88
    /// defines is `tls` (rest.md §7: "any certificate failure"), a timeout
    /// `timeout`, a URL curl cannot use `invalid`, anything else `network`.
    static func kind(of code: CURLcode) -> HTTPFailure.Kind {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_CONNECT_ERROR,
             CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND,
             CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_SHUTDOWN_FAILED, CURLE_USE_SSL_FAILED, CURLE_SSL_CLIENTCERT:
            return .tls
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .invalid
        default:
            return .network
        }
    }

    /// ``kind(of:)`` by curl's number, for callers that do not import the C module (the tests).
    static func kind(ofCurlCode code: Int) -> HTTPFailure.Kind {
        guard let raw = UInt32(exactly: code) else { return .network }
        return kind(of: CURLcode(rawValue: raw))
    }
}
