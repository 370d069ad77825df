extension Array where Element == UInt8 {
    /// Makes room for `count` more bytes, growing the buffer at least twofold
    /// when it must grow. `reserveCapacity(self.count + n)` alone allocates
    /// exactly that much: called for each of many parts appended to a
    /// buffer with no room to spare (a group's results encoded in turn),
    /// it copied the whole buffer each time.
    @inlinable
    public mutating func reserveRoom(_ count: Int) {
        let needed = self.count + count
        if capacity < needed { reserveCapacity(Swift.max(needed, capacity * 2)) }
    }
}
