import Foundation
import XCTest

/// Runs a Python interop helper of `tests/interop/` with one batch of operations: `{"ops": [...]}` on its stdin,
/// `{"results": [...]}` on its stdout, one result per op (a failing op yields `{"error": ...}`). The helper exits
/// with 3 when a Python module it needs is missing: the test is then skipped, saying which.
public struct PythonInterop: Sendable {
    /// The helper's path; `relativePath` is from the package root (this file is
    /// `<root>/Sources/TestSupport/PythonInterop.swift`).
    public let scriptURL: URL
    /// The PyPI modules the helper needs (said when it is skipped).
    public let modules: String

    public init(script relativePath: String, modules: String) {
        scriptURL = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent()
            .deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent(relativePath)
        self.modules = modules
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Sends `ops` as `{"ops": [...]}` on stdin and returns the `results` array, one entry per op.
    /// Throws `XCTSkip` when python3 or one of the Python modules is missing.
    public func run(_ ops: [[String: Any]], timeout: TimeInterval = 120) throws -> [[String: Any]] {
        guard FileManager.default.fileExists(atPath: scriptURL.path) else {
            throw Failure(description: "interop script not found at \(scriptURL.path)")
        }
        let request = try JSONSerialization.data(withJSONObject: ["ops": ops])

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", scriptURL.path]
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do {
            try process.run()
        } catch {
            throw XCTSkip("cannot start python3 (\(error)); interop tests need python3 with \(modules)")
        }

        // Drain both output pipes concurrently so a large output can never block the child.
        let output = OutputBuffers()
        let drained = DispatchGroup()
        for (handle, isStdout) in [(stdout.fileHandleForReading, true), (stderr.fileHandleForReading, false)] {
            drained.enter()
            DispatchQueue.global().async {
                output.store(handle.readDataToEndOfFile(), stdout: isStdout)
                drained.leave()
            }
        }
        signal(SIGPIPE, SIG_IGN)  // a child that exits early must not kill the test process
        try? stdin.fileHandleForWriting.write(contentsOf: request)
        try? stdin.fileHandleForWriting.close()

        if exited.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            _ = exited.wait(timeout: .now() + 5)
            throw Failure(description: "python interop timed out after \(Int(timeout)) s")
        }
        _ = drained.wait(timeout: .now() + 10)
        let errorText = String(decoding: output.stderrData, as: UTF8.self)
        switch process.terminationStatus {
        case 0: break
        case 127: throw XCTSkip("python3 not found on PATH; interop tests skipped")
        case 3: throw XCTSkip("python interop dependency missing (\(errorText.trimmingCharacters(in: .whitespacesAndNewlines))); pip install \(modules)")
        default: throw Failure(description: "python interop exited with \(process.terminationStatus): \(errorText)")
        }
        guard let object = try JSONSerialization.jsonObject(with: output.stdoutData) as? [String: Any],
              let results = object["results"] as? [[String: Any]], results.count == ops.count
        else { throw Failure(description: "unexpected python output; stderr: \(errorText)") }
        return results
    }

    /// The string `field` of a result, failing the test with the op's error when it has none.
    public static func string(_ result: [String: Any], _ field: String, file: StaticString = #filePath, line: UInt = #line) -> String? {
        if let value = result[field] as? String { return value }
        XCTFail("python op failed: \(result["error"] ?? "no \(field) in \(result)")", file: file, line: line)
        return nil
    }
}

/// Output collected from the child's pipes by two background readers.
private final class OutputBuffers: @unchecked Sendable {
    private let lock = NSLock()
    private var out = Data()
    private var err = Data()

    func store(_ data: Data, stdout: Bool) {
        lock.lock()
        defer { lock.unlock() }
        if stdout { out = data } else { err = data }
    }

    var stdoutData: Data {
        lock.lock()
        defer { lock.unlock() }
        return out
    }

    var stderrData: Data {
        lock.lock()
        defer { lock.unlock() }
        return err
    }
}
