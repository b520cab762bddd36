import Foundation
import GatewayLogging
import KafkaClient
import Logging

/// The startup check of the user-notifications topic (docs/OPERATIONS.md, "The user-notifications topic"): it is
/// consumed alongside the change topic, partition p with change partition p, so that the owner of an app's state
/// sends its user notifications; that holds only when both topics have the same partition count (and the same
/// partitioner). When the counts differ, or the topic does not exist, it is not consumed at all (an error log line,
/// `pushgateway_user_notifications_consumed` 0): consuming it would send an app's messages from a replica that
/// does not hold its subscriptions. The change topic is consumed as usual and /readyz is not affected (change events
/// are the gateway's main work; one misconfigured topic must not take it down). A broker that does not answer
/// within the wait leaves the topic consumed, as before the check (a warning). Fixed topics need a restart.
struct UserNotificationsTopicCheck {
    enum Outcome: Equatable {
        /// Both topics have this many partitions: consumed.
        case matches(Int32)
        /// Not consumed.
        case differs(changes: Int32, notifications: Int32)
        /// The user-notifications topic does not exist: not consumed.
        case missing(String)
        /// The broker's answer could not be had: consumed (as without the check).
        case unknown(String)

        var consumes: Bool {
            switch self {
            case .matches, .unknown: true
            case .differs, .missing: false
            }
        }
    }

    /// The decision from the two partition counts (or the errors asking for them). Pure.
    static func decide(changes: Result<Int32, KafkaError>, notifications: Result<Int32, KafkaError>) -> Outcome {
        switch (changes, notifications) {
        case (.success(let changes), .success(let notifications)):
            return changes == notifications ? .matches(changes) : .differs(changes: changes, notifications: notifications)
        case (_, .failure(let error)) where error.isUnknownTopic:
            return .missing(error.description)
        case (.failure(let error), _), (_, .failure(let error)):
            return .unknown(error.description)
        }
    }

    /// Makes the client that asks (on the check's thread, which also destroys it: every librdkafka call is blocking).
    let makeConsumer: @Sendable () throws -> KafkaConsumer
    let changesTopic: String
    let notificationsTopic: String
    let timeoutMs: Int32

    /// Asks the broker for both counts (blocking calls, on their own thread), decides, logs and sets the metric.
    /// Returns the topic to consume, or nil.
    func run(metrics: GatewayMetrics, logger: Logger) async -> String? {
        let (makeConsumer, changesTopic, notificationsTopic, timeoutMs) = (makeConsumer, changesTopic, notificationsTopic, timeoutMs)
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let thread = Thread {
                let consumer: KafkaConsumer
                do { consumer = try makeConsumer() } catch {
                    return continuation.resume(returning: .unknown("no Kafka client: \(error)"))
                }
                func count(_ topic: String) -> Result<Int32, KafkaError> {
                    do { return .success(try consumer.partitionCount(topic: topic, timeoutMs: timeoutMs)) } catch let error as KafkaError {
                        return .failure(error)
                    } catch {
                        return .failure(KafkaError(message: "\(error)"))
                    }
                }
                // Without the change topic's count the outcome is `unknown` whatever the other: not asked (a broker that
                // does not answer would make startup wait twice).
                let changes = count(changesTopic)
                let notifications = changes.isSuccess ? count(notificationsTopic) : .failure(KafkaError(message: "not asked"))
                consumer.close()
                continuation.resume(returning: Self.decide(changes: changes, notifications: notifications))
            }
            thread.name = "kafka-topic-check"
            thread.start()
        }
        metrics.userNotificationsConsumed.set(Double(outcome.consumes ? 1 : 0))
        let metadata: Logger.Metadata = [LoggingKeys.kafkaTopic: "\(notificationsTopic)"]
        switch outcome {
        case .matches:
            break
        case .differs(let changes, let notifications):
            logger.error(
                "the user-notifications topic is not consumed: its partition count differs from the change topic's (it must be the same; recreate it, then restart)",
                metadata: metadata.merging(
                    [LoggingKeys.kafkaPartitions: "\(notifications)", "kafka.changePartitions": "\(changes)"], uniquingKeysWith: { $1 }))
        case .missing(let reason):
            logger.error(
                "the user-notifications topic is not consumed: it does not exist (create it with the change topic's partition count, then restart)",
                metadata: metadata.merging([LoggingKeys.error: "\(reason)"], uniquingKeysWith: { $1 }))
        case .unknown(let reason):
            logger.warning(
                "the partition counts of the change and user-notifications topics could not be compared; the user-notifications topic is consumed",
                metadata: metadata.merging([LoggingKeys.error: "\(reason)"], uniquingKeysWith: { $1 }))
        }
        return outcome.consumes ? notificationsTopic : nil
    }
}

extension Result {
    fileprivate var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
