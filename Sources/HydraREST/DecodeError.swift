import Foundation
import HydraCore
import HydraHTTP

/// A body the dogma could not read.
public struct DecodeError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
