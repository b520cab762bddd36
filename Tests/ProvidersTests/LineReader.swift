import Foundation
import Logging

/// Reads the first line of a pipe with a deadline (the fake prints one JSON line when ready).
final class LineReader: @unchecked Sendable {
    private let lock = NSLock()
    private var buffer = Data()
    private var line: String?
    private let ready = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        handle.readabilityHandler = { [weak self] handle in
            let chunk = handle.availableData
            guard let self else { return }
            if chunk.isEmpty {
                handle.readabilityHandler = nil
                self.ready.signal()
                return
            }
            self.lock.lock()
            self.buffer.append(chunk)
            let newline = self.buffer.firstIndex(of: UInt8(ascii: "\n"))
            if self.line == nil, let newline {
                self.line = String(decoding: self.buffer[..<newline], as: UTF8.self)
                handle.readabilityHandler = nil
                self.lock.unlock()
                self.ready.signal()
                return
            }
            self.lock.unlock()
        }
    }

    func firstLine(timeout: TimeInterval) -> String? {
        _ = ready.wait(timeout: .now() + timeout)
        lock.lock()
        defer { lock.unlock() }
        return line
    }
}

/// A logger for tests: only critical messages (failures are asserted, not logged).
func testLogger(_ label: String) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = .critical
    return logger
}
