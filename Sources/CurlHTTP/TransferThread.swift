import CCurlShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A joinable OS thread (pthread) running one closure: the client's transfer loop must never run on the
/// Swift concurrency pool because `curl_multi_poll` blocks.
final class TransferThread: Sendable {
    private final class Body {
        let run: () -> Void
        init(run: @escaping () -> Void) {
            self.run = run
        }
    }

    #if canImport(Darwin)
    private nonisolated(unsafe) let thread: pthread_t
    #else
    private let thread: pthread_t
    #endif

    /// Starts a thread running `body`.
    init(body: @escaping () -> Void) throws {
        let context = Unmanaged.passRetained(Body(run: body)).toOpaque()
        #if canImport(Darwin)
        var handle: pthread_t?
        #else
        var handle = pthread_t()
        #endif
        let result = pthread_create(&handle, nil, { argument in
            guard let argument else { return nil }
            let body = Unmanaged<Body>.fromOpaque(argument).takeRetainedValue()
            // Named for profiles and per-thread CPU figures.
            CCurlShims_name_current_thread("curl-transfer")
            body.run()
            return nil
        }, context)
        #if canImport(Darwin)
        guard result == 0, let handle else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw HTTPClientError(code: .transport, message: "pthread_create failed (\(result))")
        }
        #else
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw HTTPClientError(code: .transport, message: "pthread_create failed (\(result))")
        }
        #endif
        thread = handle
    }

    /// Waits for the thread to return. Call exactly once, never from the thread itself.
    func join() {
        _ = pthread_join(thread, nil)
    }
}
