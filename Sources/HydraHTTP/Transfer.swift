import CCurl
import Foundation

/// One request in flight on an ``HTTPClient``: the easy handle's options and
/// the response being assembled by curl's callbacks. Loop thread only.
/// Ownership: the client's transfer table holds it; curl's callbacks reach it
/// through an unretained pointer that is valid while the easy handle is added.
final class Transfer {
    let id: UInt64
    let easy: UnsafeMutableRawPointer
    let completion: HTTPClient.Completion
    let progress: HTTPClient.Progress?
    var file: UnsafeMutablePointer<FILE>?

    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var headers: [HTTPHeader] = []
    private var body: [UInt8] = []
    private var bodyBytes = 0
    private var fileError: String?
    private var lastProgress: UInt64 = 0
    private var errorBufferPointer: UnsafeMutablePointer<CChar>?

    init(id: UInt64, easy: UnsafeMutableRawPointer, completion: @escaping HTTPClient.Completion,
         progress: HTTPClient.Progress?) {
        self.id = id
        self.easy = easy
        self.completion = completion
        self.progress = progress
    }

    /// Sets every option of the request on the easy handle.
    func configure(_ request: HTTPRequest) throws(HTTPFailure) {
        var code = CURLE_OK
        func set(_ option: CURLoption, _ value: Int) { if code == CURLE_OK { code = hydra_easy_setopt_long(easy, option, value) } }
        func set(_ option: CURLoption, _ value: String) {
            if code == CURLE_OK { code = value.withCString { hydra_easy_setopt_str(easy, option, $0) } }
        }

        set(CURLOPT_URL, request.url)
        set(CURLOPT_NOSIGNAL, 1)
        hydra_easy_setopt_ptr(easy, CURLOPT_PRIVATE, UnsafeRawPointer(bitPattern: UInt(id)))
        let me = Unmanaged.passUnretained(self).toOpaque()
        hydra_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me)
        hydra_easy_setopt_data_cb(easy, CURLOPT_WRITEFUNCTION) { data, size, count, userdata in
            Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue().receive(data!, size * count)
        }
        hydra_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me)
        hydra_easy_setopt_data_cb(easy, CURLOPT_HEADERFUNCTION) { data, size, count, userdata in
            Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue().receiveHeader(data!, size * count)
        }
        errorBufferPointer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBufferPointer!.initialize(to: 0)
        hydra_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBufferPointer)

        switch request.method {
        case "GET": break
        case "HEAD": set(CURLOPT_NOBODY, 1)
        case "POST": set(CURLOPT_POST, 1)
        default: set(CURLOPT_CUSTOMREQUEST, request.method)
        }
        if let body = request.body {
            if request.method == "GET" { set(CURLOPT_CUSTOMREQUEST, "GET") }
            set(CURLOPT_POSTFIELDSIZE, body.count)
            body.withUnsafeBytes { raw in
                if code == CURLE_OK {
                    // COPYPOSTFIELDS: curl keeps its own copy for the transfer's lifetime.
                    code = hydra_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
                }
            }
        } else if request.method == "POST" {
            set(CURLOPT_POSTFIELDSIZE, 0)
        }

        var list: UnsafeMutablePointer<curl_slist>?
        for header in request.headers {
            list = curl_slist_append(list, "\(header.name): \(header.value)")
        }
        if request.body != nil { list = curl_slist_append(list, "Expect:") }
        headerList = list
        hydra_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)

        if let timeout = request.timeoutMilliseconds, timeout > 0 { set(CURLOPT_TIMEOUT_MS, timeout) }
        if let timeout = request.connectTimeoutMilliseconds, timeout > 0 { set(CURLOPT_CONNECTTIMEOUT_MS, timeout) }
        if request.maxRedirects > 0 {
            set(CURLOPT_FOLLOWLOCATION, 1)
            set(CURLOPT_MAXREDIRS, request.maxRedirects)
        }
        if request.acceptEncoding { set(CURLOPT_ACCEPT_ENCODING, "gzip, deflate") }
        set(CURLOPT_SSL_VERIFYPEER, request.verifyTLS ? 1 : 0)
        set(CURLOPT_SSL_VERIFYHOST, request.verifyTLS ? 2 : 0)
        if let ca = request.caFile { set(CURLOPT_CAINFO, ca) }
        if request.url.hasPrefix("https:") { set(CURLOPT_PIPEWAIT, 1) }
        set(CURLOPT_TCP_NODELAY, 1)
        if request.reportsProgress && progress != nil {
            set(CURLOPT_NOPROGRESS, 0)
            hydra_easy_setopt_ptr(easy, CURLOPT_XFERINFODATA, me)
            hydra_easy_setopt_xferinfo_cb(easy) { userdata, total, now, _, _ in
                Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue().reportProgress(now, total)
                return 0
            }
        }
        if code != CURLE_OK {
            throw HTTPFailure(.invalid, "request option rejected: \(String(cString: curl_easy_strerror(code)))")
        }
    }

    // MARK: - curl callbacks

    private func receive(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        bodyBytes += count
        if let file {
            if fwrite(data, 1, count, file) != count {
                fileError = String(cString: strerror(errno))
                return 0  // aborts the transfer with CURLE_WRITE_ERROR
            }
        } else {
            data.withMemoryRebound(to: UInt8.self, capacity: count) {
                body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count))
            }
        }
        return count
    }

    /// One header line (curl passes them whole, CRLF included). Parsed on raw
    /// bytes: this runs several times per request on the worker's loop.
    private func receiveHeader(_ data: UnsafeMutablePointer<CChar>, _ count: Int) -> Int {
        data.withMemoryRebound(to: UInt8.self, capacity: count) { start in
            let line = UnsafeBufferPointer(start: start, count: count)
            if count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
               line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/") {
                // A new response (after a redirect or a 100 Continue): forget the previous headers.
                headers.removeAll(keepingCapacity: true)
                return
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return }
            let nameText = String(unsafeUninitializedCapacity: colon) { out in
                for i in 0..<colon {
                    let b = line[i]
                    out[i] = b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b + 32 : b
                }
                return colon
            }
            var lower = colon + 1, upper = count
            func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
            while lower < upper && isSpace(line[lower]) { lower += 1 }
            while upper > lower && isSpace(line[upper - 1]) { upper -= 1 }
            let value = String(decoding: UnsafeBufferPointer(rebasing: line[lower..<upper]), as: UTF8.self)
            headers.append(HTTPHeader(nameText, value))
            if file == nil, nameText == "content-length", let length = Int(value), length > 0 {
                body.reserveCapacity(min(length, 64 << 20))
            }
        }
        return count
    }

    private func reportProgress(_ now: curl_off_t, _ total: curl_off_t) {
        guard let progress, now > 0 else { return }
        let time = DispatchTime.now().uptimeNanoseconds
        let finished = total > 0 && now >= total
        // At most ten reports a second, plus the last one.
        guard finished || time - lastProgress >= 100_000_000 else { return }
        if finished && lastProgress == UInt64.max { return }
        lastProgress = finished ? UInt64.max : time
        progress(Int64(now), total > 0 ? Int64(total) : nil)
    }

    // MARK: - Results

    func response() -> HTTPResponse {
        var status = 0
        hydra_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var url: UnsafeMutablePointer<CChar>?
        hydra_easy_getinfo_str(easy, CURLINFO_EFFECTIVE_URL, &url)
        return HTTPResponse(status: status, headers: headers, body: body, bodyBytes: bodyBytes,
                            effectiveURL: url.map { String(cString: $0) } ?? "")
    }

    func failure(for code: CURLcode) -> HTTPFailure {
        if let fileError { return HTTPFailure(.invalid, "cannot write the response body: \(fileError)") }
        var detail = errorBufferPointer.map { String(cString: $0) } ?? ""
        if detail.isEmpty { detail = String(cString: curl_easy_strerror(code)) }
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return HTTPFailure(.timeout, detail)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return HTTPFailure(.invalid, detail)
        default:
            return HTTPFailure(.network, detail)
        }
    }

    /// Frees the header list, error buffer and output file. Safe to call twice.
    func releaseResources() {
        if let list = headerList { curl_slist_free_all(list); headerList = nil }
        if let file { fclose(file); self.file = nil }
        if let buffer = errorBufferPointer { buffer.deallocate(); errorBufferPointer = nil }
    }
}
