import Foundation
import HydraCore
import HydraHTTP

/// What a dogma sees of a response.
public struct DogmaResponse: Sendable {
    public var status: Int
    let headerBlock: HTTPHeaderBlock
    public var body: [UInt8]

    init(status: Int, headers: HTTPHeaderBlock, body: [UInt8]) {
        self.status = status
        self.headerBlock = headers
        self.body = body
    }

    /// Header names lowercased, in arrival order.
    public var headers: [(name: String, value: String)] { headerBlock.fields.map { ($0.name, $0.value) } }
    /// The first value of header `name` (any case), or nil.
    public func header(_ name: String) -> String? { headerBlock.first(name) }
    public var contentType: String? { headerBlock.first("content-type") }
}
