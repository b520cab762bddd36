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

extension HTTPClient {
    /// Sends one delivery request (a webhook, a Web Push message, an APNs push): the answer whatever its status, or,
    /// when none came, a retryable failure (`timeout`, `transport`, or `cancelled` when the calling task was).
    /// `submission` is marked when the request is handed to the client.
    func deliveryAnswer(to request: HTTPRequest, submission: RequestSubmission?) async -> Result<HTTPResponse, DeliveryFailure> {
        submission?.submitted()
        do {
            return .success(try await send(request))
        } catch let error as HTTPClientError {
            return .failure(DeliveryFailure(reason: error.isTimeout ? "timeout" : "transport", classification: .retryable, message: "\(error)"))
        } catch {
            return .failure(DeliveryFailure(reason: "cancelled", classification: .retryable))
        }
    }
}
