/// Runs `body` over the bytes of `bytes`, contiguously, copying only when the sequence has no
/// contiguous storage. The pointer handed to `body` is never nil, even for an empty sequence, because
/// some OpenSSL calls reject a null pointer with a zero length.
@inline(__always)
func withContiguousBytes<R>(
    _ bytes: some Sequence<UInt8>, _ body: (UnsafePointer<UInt8>, Int) throws -> R
) rethrows -> R {
    if let result = try bytes.withContiguousStorageIfAvailable({ try withNonNull($0, body) }) {
        return result
    }
    return try Array(bytes).withUnsafeBufferPointer { try withNonNull($0, body) }
}

@inline(__always)
private func withNonNull<R>(
    _ buffer: UnsafeBufferPointer<UInt8>, _ body: (UnsafePointer<UInt8>, Int) throws -> R
) rethrows -> R {
    if let base = buffer.baseAddress {
        return try body(base, buffer.count)
    }
    var zero: UInt8 = 0
    return try withUnsafePointer(to: &zero) { try body($0, 0) }
}

/// Allocates a `[UInt8]` of exactly `count` bytes and lets `body` fill it; `body` returns how many
/// bytes it actually wrote (at most `count`), and the array is trimmed to that.
@inline(__always)
func makeBytes(
    count: Int, _ body: (UnsafeMutablePointer<UInt8>) throws -> Int
) rethrows -> [UInt8] {
    try [UInt8](unsafeUninitializedCapacity: Swift.max(count, 1)) { buffer, initialized in
        initialized = 0
        // Zero first so that even a failing `body` never exposes uninitialised memory.
        buffer.initialize(repeating: 0)
        let written = try body(buffer.baseAddress!)
        precondition(written >= 0 && written <= count, "OpenSSL wrote outside the buffer")
        initialized = written
    }
}
