extension Array where Element == UInt8 {
    /// Makes room for `count` more bytes, growing the buffer at least twofold
    /// when it must grow. `reserveCapacity(self.count + n)` alone allocates
    /// exactly that much: called for each of many parts appended to one
    /// buffer (the results of a large group), it copied the whole buffer
    /// every time.
    @inlinable
    public mutating func reserveRoom(_ count: Int) {
        let needed = self.count + count
        if capacity < needed { reserveCapacity(Swift.max(needed, capacity * 2)) }
    }
}
