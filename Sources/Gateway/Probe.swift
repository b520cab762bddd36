import GatewayAPI

/// Liveness, readiness and the metrics text (gauges computed at scrape time, nothing kept on the hot path).
struct Probe: OperationsProbe {
    let health: Health
    let store: StateStore?
    let metrics: GatewayMetrics

    func notReadyReason() -> String? { health.notReadyReason }

    func metricsText() -> String {
        if let store {
            let counts = store.counts()
            metrics.subscriptions.set(Double(counts.owned))
            metrics.standbySubscriptions.set(Double(counts.standby))
            metrics.shadows.set(Double(counts.shadowsKept))
            metrics.stateBytes.set(Double(store.budget.replica.bytes))
            metrics.stateBytesLimit.set(Double(store.budget.maxReplicaBytes))
            metrics.partitionsOverBudget.set(Double(store.partitionsOverBudget.count))
            let (owned, ready) = health.partitions
            metrics.setPartitions(held: store.held, owned: owned, ready: ready)
            metrics.recordProbe(ready: health.notReadyReason == nil, stateLoaded: owned.isSubset(of: ready))
        }
        return metrics.text()
    }
}
