/// The parsed URLs of one ``HTTPClient``, by URL text: a worker that fetches
/// the same URLs again and again parses each once. Bounded: past
/// ``capacity`` entries it starts again from empty, and a URL longer than
/// ``longestURL`` is not kept (curl parses it per request, as without the
/// cache). Loop thread only (the client's).
final class ParsedURLCache {
    static let capacity = 512
    static let longestURL = 2048
    @exclusivity(unchecked) private var entries: [String: ParsedURL] = [:]

    /// `url` parsed, or nil when curl's parser refuses it.
    func parsed(_ url: String) -> ParsedURL? {
        if let hit = entries[url] { return hit }
        guard let parsed = ParsedURL(url) else { return nil }
        guard url.utf8.count <= Self.longestURL else { return parsed }
        if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
        entries[url] = parsed
        return parsed
    }
}
