#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import GatewayCore
import CompactJSON
import Prometheus
import Providers
import Synchronization

/// The gateway's metrics, in one Prometheus registry (served at `/metrics`). Names follow Prometheus
/// conventions with a `pushgateway_` prefix; labels have low cardinality (provider, reason, result).
public final class GatewayMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()

    public let eventsConsumed: Counter
    public let eventsDeadLettered: Counter
    public let eventsSkipped: Counter
    public let eventsMatched: Counter
    public let subscriptions: Gauge
    public let standbySubscriptions: Gauge
    public let shadows: Gauge
    public let inFlightRecords: Gauge
    /// Change partitions whose fetching is paused because their records in flight reached their share of the budget.
    public let partitionsPausedForBudget: Gauge
    public let latency: ValueHistogram
    public let retryBacklog: Gauge
    public let retryInFlight: Gauge
    /// Events waiting for (or being sent to) the apps' event hooks.
    public let eventHookQueued: Gauge
    /// 1 while `/readyz` answers 200, else 0 (set at scrape time).
    public let ready: Gauge
    /// 1 while every state partition this replica owns is loaded, else 0 (set at scrape time).
    public let stateLoaded: Gauge
    /// How long the last load (or promotion) of an owned state partition took.
    public let stateLoadDuration: Gauge
    /// Estimated bytes of state this replica holds (owned and standby partitions), and its high-water mark
    /// (`state.maxReplicaBytes`, 0: none); set at scrape time.
    public let stateBytes: Gauge
    public let stateBytesLimit: Gauge
    /// 1 when the user-notifications topic is consumed, 0 when the startup check refused it (``UserNotificationsTopicCheck``).
    public let userNotificationsConsumed: Gauge
    /// Owned partitions not served because they do not fit the byte budget (set at scrape time).
    public let partitionsOverBudget: Gauge
    /// 1 while the change consumer is a steady member of its group (between rebalances), from librdkafka's
    /// statistics (every 5 s).
    public let consumerGroupSteady: Gauge
    private let counters = Mutex<[CounterKey: Counter]>([:])
    /// `pushgateway_notifications_sent_total` by provider: counted once per notification, so found by the provider's
    /// name alone (not even the labels' array ``counter(_:_:_:)`` takes is made per call).
    private let sentByProvider = Mutex<[String: Counter]>([:])
    private let gauges = Mutex<[String: Gauge]>([:])
    let requestDurations = Mutex<[String: DurationHistogram]>([:])
    /// `pushgateway_gateway_latency_seconds` by provider (``gatewayLatency(provider:)``).
    let gatewayLatencies = Mutex<[String: GatewayLatencyRecorder]>([:])
    /// `pushgateway_gateway_match_latency_seconds` (``notificationsQueued(afterNanoseconds:)``).
    let matchLatency: ValueHistogram

    /// `pushgateway_<name>_<unit>`.
    private static func name(_ metricName: String, unit: String = "", help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "pushgateway", metricName: metricName, unitName: unit, helpText: help)
    }

    private static var consumed: MetricNameDescriptor { name("events_consumed", unit: "total", help: "Change events consumed, by result") }

    public init() {
        eventsConsumed = registry.makeCounter(descriptor: Self.consumed, labels: [("result", "ok")])
        eventsDeadLettered = registry.makeCounter(descriptor: Self.consumed, labels: [("result", "dead_letter")])
        eventsSkipped = registry.makeCounter(descriptor: Self.consumed, labels: [("result", "unknown_app")])
        eventsMatched = registry.makeCounter(
            descriptor: Self.name("events_matched", unit: "total", help: "Change events that matched at least one subscription"))
        subscriptions = registry.makeGauge(
            descriptor: Self.name("subscriptions", help: "Subscriptions of the partitions this replica owns"))
        standbySubscriptions = registry.makeGauge(
            descriptor: Self.name("standby_subscriptions", help: "Subscriptions held as standby copies of partitions owned elsewhere"))
        shadows = registry.makeGauge(
            descriptor: Self.name("shadows", help: "Nodes whose data is kept for value/childEvent subscriptions"))
        inFlightRecords = registry.makeGauge(
            descriptor: Self.name("records_in_flight", help: "Consumed records whose notifications are not yet answered"))
        partitionsPausedForBudget = registry.makeGauge(
            descriptor: Self.name(
                "partitions_paused_for_budget", help: "Change partitions not fetched because their records in flight reached their share"))
        retryBacklog = registry.makeGauge(
            descriptor: Self.name("retry_backlog", help: "Notifications waiting for a retry (this replica's apps)"))
        retryInFlight = registry.makeGauge(
            descriptor: Self.name("retries_in_flight", help: "Retries being sent now"))
        eventHookQueued = registry.makeGauge(
            descriptor: Self.name("event_hook_queued", help: "Events waiting for (or being sent to) the apps' event hooks"))
        latency = registry.makeValueHistogram(
            descriptor: Self.name(
                "end_to_end_latency", unit: "seconds", help: "From the change event's timestamp to the provider's answer"),
            buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
        matchLatency = registry.makeValueHistogram(descriptor: Self.matchLatencyName, buckets: Self.gatewayLatencyBuckets)
        ready = registry.makeGauge(
            descriptor: Self.name("ready", help: "1 while this replica is ready (GET /readyz answers 200), else 0"))
        stateLoaded = registry.makeGauge(
            descriptor: Self.name("state_loaded", help: "1 while every state partition this replica owns is loaded, else 0"))
        stateLoadDuration = registry.makeGauge(
            descriptor: Self.name(
                "state_load_duration", unit: "seconds", help: "How long the last load (or promotion) of an owned state partition took"))
        stateBytes = registry.makeGauge(
            descriptor: Self.name("state_bytes", help: "Estimated bytes of state (subscriptions, shadows) this replica holds"))
        consumerGroupSteady = registry.makeGauge(
            descriptor: Self.name(
                "consumer_group_steady",
                help: "1 while the change consumer is a steady member of its group (no rebalance under way), from librdkafka's statistics"))
        partitionsOverBudget = registry.makeGauge(
            descriptor: Self.name(
                "partitions_over_budget", help: "Partitions this replica owns but does not serve: they do not fit its state byte budget"))
        userNotificationsConsumed = registry.makeGauge(
            descriptor: Self.name(
                "user_notifications_consumed",
                help: "1 when the user-notifications topic is consumed, 0 when it is not (its partition count differs from the change topic's, or it does not exist)"))
        stateBytesLimit = registry.makeGauge(
            descriptor: Self.name(
                "state_bytes_limit", help: "The replica's high-water mark of state bytes (state.maxReplicaBytes; 0: none)"))
        // Counters whose label values are known in advance start at 0, so that an alert on `increase()` sees
        // their first increment (a series that appears at 1 has no increase).
        for category in ["undecodable", "invalid"] { _ = counter("dead", Self.deadLetters, [("category", category)]) }
        for outcome in ["delivered", "discarded", "dropped_unsubscribed", "dropped_not_owner", "expired"] {
            _ = counter("retried", Self.retriesFinished, [("outcome", outcome)])
        }
        for result in ["loaded", "refused", "removed"] { _ = counter("settings", Self.settingsReloads, [("result", result)]) }
        ownershipFencedStart()
        for provider in GatewayLatencyRecorders.providers { _ = gatewayLatency(provider: provider) }
        for reason in ["queue_full", "rejected", "expired", "no_hook", "shutdown"] {
            _ = counter("hookdropped", Self.eventHookDroppedName, [("reason", reason)])
        }
        _ = counter("hooksent", Self.eventHookSentName, [])
        // Sends that failed for want of an OAuth access token (the alert on token refreshes reads them).
        for (provider, reason) in [("fcm", "authentication"), ("hms", "hms_authentication")] {
            _ = counter("failed", Self.failed, [("provider", provider), ("reason", reason)])
        }
    }

    private static var fenced: MetricNameDescriptor {
        name(
            "ownership_fenced", unit: "total",
            help: "Partitions this replica gave up because the state topic showed a newer owner (a zombie stopped)")
    }

    private func ownershipFencedStart() {
        _ = counter(
            "fenced", Self.fenced,
            [])
    }

    // MARK: The apps' event hooks

    private static var eventHookDroppedName: MetricNameDescriptor {
        name("event_hook_dropped", unit: "total", help: "Event hook events dropped: queue full, refused by the receiver, retried for 2 hours, hook removed, shutdown")
    }
    private static var eventHookSentName: MetricNameDescriptor {
        name("event_hook_sent", unit: "total", help: "Event hook events accepted (2xx) by the apps' backends")
    }

    /// An event queued for an app's hook.
    func eventHookEvent(type: String) {
        counter("hookevent", Self.name("event_hook_events", unit: "total", help: "Event hook events queued, by type"), [("type", type)])
            .increment()
    }

    func eventHookSent() { counter("hooksent", Self.eventHookSentName, []).increment() }

    /// An attempt that failed (retried or not).
    func eventHookFailed(reason: String) {
        counter(
            "hookfailed", Self.name("event_hook_failures", unit: "total", help: "Event hook requests that failed, by reason"),
            [("reason", reason)]
        ).increment()
    }

    func eventHookDropped(reason: String, count: Int = 1) {
        counter("hookdropped", Self.eventHookDroppedName, [("reason", reason)]).increment(by: Int64(count))
    }

    /// Notifications handed out after waiting for their provider project's send rate (`project`: `fcm:<project id>`,
    /// `hms:<app id>`; `provider`: its prefix).
    func sendsPaced(project: String, count: Int) {
        counter(
            "paced", Self.name("sends_paced", unit: "total", help: "Notifications that waited for their provider project's send rate"),
            Self.projectLabels(project)
        ).increment(by: Int64(count))
    }

    /// Notifications waiting now for their provider project's send rate (an upper bound).
    func waitingForPace(project: String, count: Int) {
        let labels = Self.projectLabels(project)
        let key = labels.map { "\($0.0)=\($0.1)" }.joined(separator: "|")
        let gauge = gauges.withLock { cache in
            if let gauge = cache[key] { return gauge }
            let gauge = registry.makeGauge(
                descriptor: Self.name("notifications_waiting_for_pace", help: "Notifications waiting for their provider project's send rate"),
                labels: labels)
            cache[key] = gauge
            return gauge
        }
        gauge.set(Double(count))
    }

    private static func projectLabels(_ project: String) -> [(String, String)] {
        let provider = project.split(separator: ":", maxSplits: 1).first.map(String.init) ?? project
        return [("provider", provider), ("project", project)]
    }

    /// The probe's state, recorded when `/metrics` is scraped.
    public func recordProbe(ready isReady: Bool, stateLoaded isLoaded: Bool) {
        ready.set(isReady ? 1.0 : 0.0)
        stateLoaded.set(isLoaded ? 1.0 : 0.0)
    }

    /// The counter of `descriptor` with `labels`, made on first use (labels have low cardinality).
    private func counter(
        _ kind: StaticString, _ descriptor: @autoclosure () -> MetricNameDescriptor, _ labels: [(String, String)]
    ) -> Counter {
        let key = CounterKey(kind: kind, labels: labels)
        return counters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = registry.makeCounter(descriptor: descriptor(), labels: labels)
            cache[key] = counter
            return counter
        }
    }

    private static var sent: MetricNameDescriptor {
        name("notifications_sent", unit: "total", help: "Notifications accepted by a provider")
    }
    private static var failed: MetricNameDescriptor {
        name(
            "notifications_failed", unit: "total", help: "Notifications a provider refused or that could not be sent")
    }
    private static var revocations: MetricNameDescriptor {
        name("revocations", unit: "total", help: "Subscriptions revoked, by reason")
    }
    private static var deadLetters: MetricNameDescriptor {
        name("dead_letters", unit: "total", help: "Records written to the dead-letter topic")
    }
    private static var ourFault: MetricNameDescriptor {
        name(
            "notifications_our_fault", unit: "total",
            help: "Notifications refused because our request, configuration or credentials are wrong (nobody revoked)")
    }

    public func notificationSent(provider: String) {
        let counter = sentByProvider.withLock { cache in
            if let counter = cache[provider] { return counter }
            let counter = self.counter("sent", Self.sent, [("provider", provider)])
            cache[provider] = counter
            return counter
        }
        counter.increment()
    }

    public func notificationFailed(provider: String, reason: String) {
        counter("failed", Self.failed, [("provider", provider), ("reason", reason)]).increment()
    }

    /// A provider refused a notification: counted by reason and, when it is our fault (SPEC §8: reported
    /// loudly, nobody revoked), in `pushgateway_notifications_our_fault_total` too.
    public func notificationFailed(provider: String, failure: DeliveryFailure) {
        notificationFailed(provider: provider, reason: failure.reason)
        if failure.classification == .ourFault {
            counter("ourfault", Self.ourFault, [("provider", provider), ("reason", failure.reason)]).increment()
        }
    }

    public func revoked(reason: String, count: Int = 1) {
        counter("revoked", Self.revocations, [("reason", reason)]).increment(by: Int64(count))
    }

    private static var retriesScheduled: MetricNameDescriptor {
        name("retries_scheduled", unit: "total", help: "Retries scheduled after a failed send, by provider error")
    }
    private static var retriesFinished: MetricNameDescriptor {
        name("retries_finished", unit: "total", help: "Retried notifications by outcome: delivered, discarded (after 2 hours)")
    }

    public func retryScheduled(reason: String) {
        counter("retry", Self.retriesScheduled, [("reason", reason)]).increment()
    }

    public func retryOutcome(_ outcome: String, count: Int = 1) {
        counter("retried", Self.retriesFinished, [("outcome", outcome)]).increment(by: Int64(count))
    }

    private static var settingsReloads: MetricNameDescriptor {
        name("app_settings_loads", unit: "total", help: "App settings files read, by result (loaded, refused, removed)")
    }

    public func appSettingsLoaded(result: String) {
        counter("settings", Self.settingsReloads, [("result", result)]).increment()
    }

    private static var apiAuth: MetricNameDescriptor {
        name("api_auth_failures", unit: "total", help: "API requests refused by authentication or rules, by reason")
    }

    /// A write refused by a quota: `path_keys`, `user`, `device`, `app`, `app_bytes`, `partition_bytes`,
    /// `replica_bytes`, `anonymous_rate`, `client_rate`, `device_rate`, `user_rate`.
    /// A webhook destination refused at subscribe time (loopback, private, link-local: the app does not allow
    /// them). Refusals at delivery are `pushgateway_notifications_failed_total{provider="webhook",reason="address_refused"}`.
    public func webhookDestinationRefused() {
        counter(
            "webhook_refused",
            Self.name("webhook_destinations_refused", unit: "total", help: "Webhook subscriptions refused for their destination's address"), []
        ).increment()
    }

    public func quotaRefused(_ quota: String) {
        counter(
            "quota", Self.name("quota_refusals", unit: "total", help: "API writes refused by a per-app quota, by quota"),
            [("quota", quota)]
        ).increment()
    }

    private static var partitionState: MetricNameDescriptor {
        name("partition_state", help: "1 for each state partition held, by role (owner, standby) and load state (loading, ready)")
    }
    private let partitionGauges = Mutex<[String: Gauge]>([:])

    /// One gauge per held partition and state; the ones no longer true are set to 0.
    func setPartitions(held: [(partition: Int32, role: PartitionRole)], owned: Set<Int32>, ready: Set<Int32>) {
        var current: [String: (String, String, String)] = [:]
        for (partition, role) in held {
            let roleLabel: String
            let state: String
            switch role {
            case .standby: (roleLabel, state) = ("standby", "ready")
            case .owner: (roleLabel, state) = ("owner", ready.contains(partition) ? "ready" : "loading")
            case .loading: (roleLabel, state) = (owned.contains(partition) ? "owner" : "standby", "loading")
            case .releasing, .released: continue
            }
            current["\(partition)|\(roleLabel)|\(state)"] = (String(partition), roleLabel, state)
        }
        partitionGauges.withLock { gauges in
            for (key, gauge) in gauges where current[key] == nil { gauge.set(Double(0)) }
            for (key, labels) in current {
                let gauge = gauges[key] ?? registry.makeGauge(
                    descriptor: Self.partitionState, labels: [("partition", labels.0), ("role", labels.1), ("state", labels.2)])
                gauges[key] = gauge
                gauge.set(Double(1))
            }
        }
    }

    /// A partition finished loading in `seconds`.
    func stateLoaded(seconds: Double) {
        counter("loads", Self.name("state_loads", unit: "total", help: "State partitions loaded for ownership"), []).increment()
        stateLoadDuration.set(seconds)
    }

    /// A librdkafka client replaced after a fatal error (`producer`).
    func kafkaClientReplaced(_ client: String) {
        counter(
            "replaced", Self.name("kafka_clients_replaced", unit: "total", help: "Kafka clients replaced after a fatal error, by client"),
            [("client", client)]
        ).increment()
    }

    /// A state-topic record that could not be read (skipped at load and in the tail; logged).
    public func stateRecordUnreadable() {
        counter(
            "unreadable", Self.name("state_records_unreadable", unit: "total", help: "State-topic records skipped as unreadable"),
            []
        ).increment()
    }

    public func authFailure(reason: String) {
        counter("auth", Self.apiAuth, [("reason", reason)]).increment()
    }

    /// A user notification was consumed: `pushgateway_user_notifications_total{result="sent"|"no_device"}`, and
    /// the devices it was queued for in `pushgateway_user_notification_devices_total`.
    public func userNotifications(devices: Int) {
        counter(
            "user", Self.name("user_notifications", unit: "total", help: "User notifications consumed, by result"),
            [("result", devices > 0 ? "sent" : "no_device")]
        ).increment()
        if devices > 0 {
            counter(
                "userdevices", Self.name("user_notification_devices", unit: "total", help: "Devices user notifications were queued for"), []
            ).increment(by: Int64(devices))
        }
    }

    public func deadLetter(category: String) {
        counter("dead", Self.deadLetters, [("category", category)]).increment()
    }

    private static var lag: MetricNameDescriptor {
        name("consumer_lag", unit: "records", help: "Records of an assigned change partition not yet consumed")
    }
    private let lagGauges = Mutex<[Int32: Gauge]>([:])

    /// Sets the lag of each assigned change partition from librdkafka's statistics JSON
    /// (`topics.<topic>.partitions.<n>.consumer_lag`, -1 when unknown).
    public func recordConsumerLag(statistics: [UInt8], topic: String) {
        guard let document = try? JSONParser.parse(statistics) else { return }
        // The consumer group's join state: "steady" between rebalances. A member that never gets back to it (a
        // coordinator that never completes a rebalance) owns nothing new: the alert and the nemesis run read it.
        if let joinState = document["cgrp"]?["join_state"]?.stringValue {
            consumerGroupSteady.set(joinState == "steady" ? 1.0 : 0.0)
        }
        guard let partitions = document["topics"]?[topic]?["partitions"]?.objectValue else { return }
        for (key, partition) in partitions {
            guard let number = Int32(key.string), number >= 0, let lag = partition["consumer_lag"]?.doubleValue else { continue }
            let gauge = lagGauges.withLock { gauges in
                if let gauge = gauges[number] { return gauge }
                let gauge = registry.makeGauge(descriptor: Self.lag, labels: [("partition", key.string)])
                gauges[number] = gauge
                return gauge
            }
            gauge.set(max(0, lag))
        }
    }

    /// A members-topic record or a forwarded call refused (`unsigned`, `bad_signature`, `invalid`, `replayed`,
    /// `stale`, …), by what it was.
    func clusterMessageRefused(_ kind: String, reason: String) {
        counter(
            "cluster", Self.name(
                "cluster_messages_refused", unit: "total",
                help: "Members records and forwarded calls refused (not signed with the cluster secret, malformed, replayed), by kind and reason"),
            [("kind", kind), ("reason", reason)]
        ).increment()
    }

    /// This replica found, in a partition it believed it owned, a write of a newer owner (it stops serving it).
    func ownershipFenced() {
        counter(
            "fenced", Self.fenced,
            []
        ).increment()
    }

    /// A write of an older owner found after this owner's load marker, and overwritten with what this owner holds.
    func zombieWritesRepaired(_ count: Int) {
        counter(
            "zombie", Self.name(
                "zombie_writes_repaired", unit: "total",
                help: "State records written by a previous owner after this replica took the partition, overwritten"),
            []
        ).increment(by: Int64(count))
    }

    /// Records skipped while reading the state topic because their owner had been superseded (a zombie's writes).
    func zombieRecordsSkipped(_ count: Int = 1) {
        counter(
            "skipped", Self.name(
                "state_records_superseded", unit: "total",
                help: "State records skipped at load because a newer owner had taken the partition before they were written"),
            []
        ).increment(by: Int64(count))
    }

    public func text() -> String { registry.emitToString() }
}

/// What ``GatewayMetrics``' counters are cached by: the counter's kind and its labels as given, hashed and compared
/// as they are (no key string built per call).
private struct CounterKey: Hashable {
    let kind: StaticString
    let labels: [(String, String)]

    static func == (left: CounterKey, right: CounterKey) -> Bool {
        left.kind.utf8CodeUnitCount == right.kind.utf8CodeUnitCount
            && memcmp(left.kind.utf8Start, right.kind.utf8Start, left.kind.utf8CodeUnitCount) == 0
            && left.labels.elementsEqual(right.labels) { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(bytes: UnsafeRawBufferPointer(start: kind.utf8Start, count: kind.utf8CodeUnitCount))
        hasher.combine(labels.count)
        for (name, value) in labels {
            hasher.combine(name)
            hasher.combine(value)
        }
    }
}
