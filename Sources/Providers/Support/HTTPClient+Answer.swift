import CurlHTTP

extension HTTPClient {
    /// Sends `request` to a provider (its send or token endpoint): the answer, whatever its status, or the
    /// provider's failure when none came (`unanswered`, from the transport error) or the calling task was
    /// cancelled (``ProviderFailure/cancelled(_:)`` with `cancelled`).
    func answer<Failure: ProviderFailure>(
        to request: HTTPRequest, unanswered: (HTTPClientError) -> Failure, cancelled: String
    ) async throws(Failure) -> HTTPResponse {
        do {
            return try await send(request)
        } catch let error as HTTPClientError {
            throw unanswered(error)
        } catch {
            throw .cancelled(cancelled)
        }
    }
}
