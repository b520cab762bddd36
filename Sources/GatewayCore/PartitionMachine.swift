import PushCore

/// One partition of the state topic as this replica holds it, as a state machine: its contents, its write log
/// (the owner's writes in flight, applied in produce order), its fence, its repairs and its revocations are
/// changed only by the inputs below, and each input returns what is to be done (``PartitionAction``): records to
/// produce, notifications to queue, tickets to retain or release, callers to answer, timers to set. It does no
/// I/O, takes no lock and reads no clock (the driver passes `uptime`, monotonic nanoseconds, and `now`,
/// seconds since the epoch): ``PartitionState`` drives it, and the tests feed it inputs and read its actions.
///
/// - Loading and standby: records read from the log are applied in log order, skipping those of superseded
///   owners (``PartitionContents/applyFromLog(_:key:offset:tag:)``).
/// - Owner: every decision (an API write, an event's matching, a revocation) is an input, and the records it
///   implies are produced in decision order. They apply to memory when acknowledged, still in that order: an
///   API call is answered once its write is durable and applied. Shadows and revocations are the exception:
///   they take effect in memory at once (matching must see them for the very next event) and their records are
///   checkpoints of that state.
/// - Fencing (docs/ARCHITECTURE.md, "Fenced owners"): every write must land right after the previous one; a
///   write that lands further on is applied only once the gap is read back and holds no newer owner's marker.
///   When it does, this replica is superseded: nothing more is applied, answered or written.
/// - Revocation: a revoked subscription stops matching at the revocation point (the input that decides it), its
///   revoke is queued behind what its line already has, and a marker record makes the pending revoke durable;
///   the tombstone follows once the revoke is delivered (``revokeDelivered(_:uptime:)``). A write produced
///   before the revocation never brings it back (``PartitionContents/apply(_:sequence:)``).
/// - One retry mechanism: a write that failed is written again after a backoff by a timer the machine sets
///   (``PartitionTimer``): a subscription's record as memory has it then (a repair, never while a later write
///   of it is in flight), an event's shadow checkpoint with the node's data then.
public struct PartitionMachine {
    public typealias Action = PartitionAction

    public var contents: PartitionContents

    // MARK: The owner's writes, applied in produce order

    private var nextSequence: UInt64 = 1
    private var nextToApply: UInt64 = 1
    private var inFlight: [UInt64: Write] = [:]
    /// Subscription writes produced and not applied yet, per identity: a new decision about the same
    /// subscription waits for them (so that two creates of one subscription give 201 and 409, never 201 twice).
    private var pendingWrites: [RetryKey: Int] = [:]
    private var identityWaiters: [RetryKey: [Reply]] = [:]
    /// Answered when no write is in flight any more.
    private var drainWaiters: [Reply] = []
    /// Subscriptions whose record is to be written again (a write failed), and the tickets waiting for it.
    private var repairs: Set<RetryKey> = []
    private var repairWaiters: [RetryKey: [UInt64]] = [:]
    /// Ended subscriptions whose tombstone (produced with sequence `after` or later: a repair) is not stored yet:
    /// reported to the app's event hook once it is.
    private var endings: [RetryKey: (ended: EndedSubscription, after: UInt64)] = [:]

    // MARK: Ownership

    /// This replica's ownership, once promoted: its tag, and what its writes confirm.
    private var fence: OwnershipFence?
    /// The tag and offset of the load marker this replica wrote, until it is promoted.
    private var marker: (tag: [UInt8], offset: Int64, writtenAt: UInt64)?
    /// Every tag this replica wrote a load marker with for this partition (its own markers never supersede it).
    private var ownTags: Set<[UInt8]> = []

    public init(role: PartitionRole, bytes: ByteMeter? = nil) {
        contents = PartitionContents(role: role, bytes: bytes)
    }

    /// A write in flight.
    private struct Write {
        /// The state record; nil for an ownership check (``OwnerTag/ownerCheckKey``), which holds no state.
        var record: StateRecord?
        /// When it was produced: its landing where expected confirms ownership after that instant.
        var producedAt: UInt64
        var purpose: Purpose
        /// An API write: later decisions about the same subscription wait for it.
        var counted = false
        /// The write creates a subscription: reserved in its app's quota counts until applied.
        var creates: Subscription?
        /// Set when the broker answered.
        var result: Result<Int64, WriteFailure>?
    }

    /// What follows a write's settlement.
    private enum Purpose {
        /// Nothing (a tombstone, a shadow rewritten from memory); a subscription record is repaired if it fails.
        case plain
        case ownershipCheck
        /// An API decision: its caller is answered.
        case decision(Reply)
        /// A checkpoint of what memory holds (a pending-retry line): its owner is told when given.
        case checkpoint(Reply?)
        /// An event's shadow checkpoint: releases the ticket, or is written again after `retryIn` seconds.
        case shadow(ticket: UInt64, retryIn: Double)
        /// A revocation marker an event caused: releases the ticket once stored (repaired first if it failed).
        case marker(RetryKey, ticket: UInt64?)
        /// A repair, written after waiting `delay`.
        case repair(RetryKey, delay: Double)
    }

    // MARK: Reading

    /// True while another owner's marker has been found after this replica's.
    public var isFenced: Bool { fence?.fenced == true }

    /// The ownership's last confirmation for lock-free readers: `.max` without a fence (nothing to confirm), 0
    /// while superseded or while a gap is being read back.
    public var confirmationStamp: UInt64 {
        guard let fence else { return .max }
        return fence.fenced || fence.checkingGap ? 0 : fence.confirmedAt
    }

    public var writesInFlight: Int { inFlight.count }

    public func writesPending(of identity: RetryKey) -> Bool { (pendingWrites[identity] ?? 0) > 0 }

    // MARK: Roles and the load

    public mutating func setRole(_ role: PartitionRole) {
        contents.role = role
        // Tombstones this replica no longer writes: whoever owns the partition next decides (and reports) again.
        if !role.isActive { endings = [:] }
    }

    /// A load marker was read at `offset`: from here on, records are the ones of the owner tagged `tag`.
    public mutating func readMarker(tag: [UInt8]?, offset: Int64) {
        contents.logEnd = max(contents.logEnd, offset + 1)
        contents.logOwner = tag
    }

    /// The log was read up to `offset` (a record this replica skips, such as an ownership check).
    public mutating func advanceLogEnd(to offset: Int64) { contents.logEnd = max(contents.logEnd, offset) }

    /// This replica is about to write a load marker tagged `tag` (before it is written: a write of this replica in
    /// flight may find it in a gap before the marker's own acknowledgement comes back).
    public mutating func willWriteMarker(tag: [UInt8]) { ownTags.insert(tag) }

    /// This replica wrote its load marker, tagged `tag`, at `offset`, at `writtenAt`; it is promoted once the log
    /// is read up to it. Its ownership counts as confirmed when the marker was written, not when the load ends.
    public mutating func markerWritten(tag: [UInt8], offset: Int64, writtenAt: UInt64) { marker = (tag, offset, writtenAt) }

    /// What a previous owner left to deliver, in the order it goes to the delivery lines.
    public struct Handover: Sendable, Equatable {
        /// Its stored lines (pending retries, a revoke among them), each in its order.
        public var lines: [[PendingNotification]]
        /// The revokes of subscriptions revoked but not tombstoned that no stored line holds, each the last
        /// message of its subscription.
        public var revokes: [PendingNotification]

        public var isEmpty: Bool { lines.isEmpty && revokes.isEmpty }
    }

    /// Makes this replica the owner of a loaded partition: restores the shadow checkpoints into the index, hands
    /// over what the previous owner left to deliver, starts the fence from its load marker, and rewrites the keys
    /// of the superseded records it skipped. Nil when it was given up meanwhile (a revocation between the load and
    /// now). `now`: seconds since the epoch, the revokes' first attempt.
    public mutating func promote(uptime: UInt64, now: Double) -> (handover: Handover, actions: [Action])? {
        guard contents.role == .loading else { return nil }
        var actions: [Action] = []
        for (app, checkpoints) in contents.checkpoints {
            let data = contents.app(app.string)
            for (path, value) in checkpoints { data.index.restoreShadow(at: path, value: value) }
        }
        contents.checkpoints = [:]
        let lines = Array(contents.followedRetries.values)
        contents.followedRetries = [:]
        let revokesInLines = Set(lines.compactMap { line in line.contains(where: \.isRevoke) ? line.first?.key : nil })
        let revokes = contents.revoked.filter { !$0.value.tombstoned && !revokesInLines.contains($0.key) }.values.map { revoked in
            PendingNotification(
                app: revoked.app, path: revoked.subscription.path, subscriber: revoked.subscription.subscriber,
                format: revoked.subscription.settings.format, encryption: revoked.subscription.settings.encryption, content: .revoke(revoked.reason), scope: revoked.app, firstFailureAt: now)
        }
        contents.role = .owner
        if let marker {
            fence = OwnershipFence(tag: marker.tag, markerOffset: marker.offset, at: marker.writtenAt)
            self.marker = nil
        }
        let superseded = Array(contents.superseded.values)
        contents.superseded = [:]
        rewrite(superseded, actions: &actions, uptime: uptime)
        return (Handover(lines: lines, revokes: revokes), actions)
    }

    // MARK: Decisions of the API

    /// Whether a decision may be made now: only by the owner, and one at a time per subscription.
    public enum Admission: Sendable, Equatable {
        case open
        /// Not the owner (or superseded): the answer is 503 `notOwner`.
        case notOwner
        /// A write about the same subscription is in flight: wait for it (``waitForWrites(of:callback:)``).
        case busy
    }

    public func admission(identity: RetryKey?) -> Admission {
        guard contents.role == .owner, fence?.fenced != true else { return .notOwner }
        if let identity, writesPending(of: identity) { return .busy }
        return .open
    }

    /// Whether a decision about every subscription `concerns` picks may be made now (a token replacement: all the
    /// subscriptions of one user on the old token and on the new one, whatever their path): not while a write about
    /// any of them is in flight (``waitForWrites(concerning:callback:)``). O(writes in flight).
    public func admission(concerning concerns: (RetryKey) -> Bool) -> Admission {
        guard contents.role == .owner, fence?.fenced != true else { return .notOwner }
        return pendingWrites.keys.contains(where: concerns) ? .busy : .open
    }

    /// `callback` is resumed once no write about one of the subscriptions `concerns` picks is in flight any more
    /// (one of them at a time: the caller asks again); false when none is now.
    public mutating func waitForWrites(concerning concerns: (RetryKey) -> Bool, callback: Reply) -> Bool {
        guard let key = pendingWrites.keys.first(where: concerns) else { return false }
        identityWaiters[key, default: []].append(callback)
        return true
    }

    /// Produces the records of an API decision (made on ``contents`` just before, within the same input):
    /// `callback` is settled once per record, when it is applied or has failed.
    public mutating func decided(_ records: [StateRecord], callback: Reply, uptime: UInt64) -> [Action] {
        var actions: [Action] = []
        for record in records {
            var write = Write(record: record, producedAt: uptime, purpose: .decision(callback), counted: true)
            if case .subscription(let subscription) = record {
                pendingWrites[subscription.identity, default: 0] += 1
                if subscription.settings != nil, subscription.revoked == nil, let app = contents.existingApp(subscription.app),
                    app.index.subscription(path: subscription.subscription.path, subscriber: subscription.subscription.subscriber) == nil
                {
                    app.reserve(subscription.subscription, by: 1)
                    write.creates = subscription.subscription
                }
            }
            submit(write, actions: &actions)
        }
        return actions
    }

    /// `callback` is resumed once no write about `identity` is in flight; false when none is now (nothing to wait).
    public mutating func waitForWrites(of identity: RetryKey, callback: Reply) -> Bool {
        guard writesPending(of: identity) else { return false }
        identityWaiters[identity, default: []].append(callback)
        return true
    }

    /// `callback` is resumed once no write at all is in flight (at once when none is).
    public mutating func whenDrained(_ callback: Reply) -> [Action] {
        if inFlight.isEmpty { return [.resume(callback, true)] }
        drainWaiters.append(callback)
        return []
    }

    /// Writes records that only checkpoint what memory already holds (pending-retry lines): nothing is applied on
    /// acknowledgement. `callback`, when given, is settled once per record.
    public mutating func checkpoint(_ records: [StateRecord], callback: Reply?, uptime: UInt64) -> [Action] {
        var actions: [Action] = []
        for record in records { submit(Write(record: record, producedAt: uptime, purpose: .checkpoint(callback)), actions: &actions) }
        return actions
    }

    // MARK: Acknowledgements

    /// The broker answered the write `sequence`: its offset, or why it failed.
    public mutating func writeAcknowledged(_ sequence: UInt64, _ result: Result<Int64, WriteFailure>, uptime: UInt64) -> [Action] {
        guard inFlight[sequence] != nil else { return [] }
        inFlight[sequence]?.result = result
        var actions: [Action] = []
        applyAcknowledged(actions: &actions, uptime: uptime)
        return actions
    }

    /// Applies the acknowledged writes at the head of the produce order. A write that landed past where this
    /// owner's next write was expected stops the applying until the gap is read back.
    private mutating func applyAcknowledged(actions: inout [Action], uptime: UInt64) {
        while let write = inFlight[nextToApply], let result = write.result {
            var stored = false
            if case .success(let offset) = result {
                if var fence {
                    if fence.fenced {
                        stored = false
                    } else if fence.checkingGap {
                        break
                    } else if offset > fence.expectedOffset {
                        fence.checkingGap = true
                        self.fence = fence
                        actions.append(.readGap(from: fence.expectedOffset, to: offset, tag: fence.tag, attempt: 0, after: 0))
                        break
                    } else {
                        fence.expectedOffset = max(fence.expectedOffset, offset + 1)
                        fence.confirmedAt = uptime
                        fence.confirmedProducedAt = max(fence.confirmedProducedAt, write.producedAt)
                        self.fence = fence
                        resumeConfirmed(actions: &actions)
                        stored = true
                    }
                } else {
                    stored = true
                }
            }
            let sequence = nextToApply
            inFlight[sequence] = nil
            nextToApply += 1
            if stored, case .success(let offset) = result {
                contents.logEnd = max(contents.logEnd, offset + 1)
                if case .subscription(let subscription)? = write.record {
                    contents.apply(subscription, sequence: sequence)
                    reportEnding(subscription, sequence: sequence, actions: &actions)
                }
            } else if case .failure(let failure) = result {
                actions.append(.writeFailed(failure))
            }
            if let created = write.creates, case .subscription(let subscription)? = write.record {
                contents.existingApp(subscription.app)?.reserve(created, by: -1)
            }
            if write.counted, case .subscription(let subscription)? = write.record {
                let key = subscription.identity
                let left = (pendingWrites[key] ?? 1) - 1
                pendingWrites[key] = left > 0 ? left : nil
                if left <= 0, let waiters = identityWaiters.removeValue(forKey: key) {
                    actions += waiters.map { .resume($0, true) }
                }
            }
            settled(write, stored: stored, maybeStored: !stored && (result.failure?.maybeStored ?? false), actions: &actions)
        }
        if inFlight.isEmpty, !drainWaiters.isEmpty {
            actions += drainWaiters.map { .resume($0, true) }
            drainWaiters = []
        }
        if let fence, !fence.waiters.isEmpty, !fence.fenced, !fence.checkingGap, !fence.checkScheduled {
            // Someone waits for a confirmation no write in flight will give (it failed): check again shortly.
            let latest = fence.waiters.values.map(\.after).max() ?? 0
            if !inFlight.values.contains(where: { $0.producedAt >= latest }) {
                self.fence?.checkScheduled = true
                actions.append(.schedule(.ownershipCheck, after: 0.1))
            }
        }
    }

    /// What follows a write's settlement, by its purpose. A subscription record that was not stored (or maybe
    /// was: a timeout) is written again, as memory has it then, so that the log converges to what this replica
    /// decided and answered.
    private mutating func settled(_ write: Write, stored: Bool, maybeStored: Bool, actions: inout [Action]) {
        if !stored, case .subscription(let subscription)? = write.record {
            if case .repair(let key, let delay) = write.purpose {
                scheduleRepair(key, delay: min(delay * 2, 30), actions: &actions)
            } else {
                scheduleRepair(subscription.identity, delay: 0.5, actions: &actions)
            }
        }
        switch write.purpose {
        case .plain, .ownershipCheck:
            break
        case .decision(let callback):
            actions.append(.settle(callback, stored: stored, maybeStored: maybeStored))
        case .checkpoint(let callback):
            if let callback { actions.append(.settle(callback, stored: stored, maybeStored: maybeStored)) }
        case .shadow(let ticket, let retryIn):
            if stored {
                actions.append(.releaseTicket(ticket))
            } else if case .shadow(let shadow)? = write.record {
                actions.append(.schedule(.checkpoint(app: shadow.app, path: shadow.path, ticket: ticket, delay: retryIn), after: retryIn))
            }
        case .marker(let key, let ticket):
            guard let ticket else { break }
            if stored { actions.append(.releaseTicket(ticket)) } else { repairWaiters[key, default: []].append(ticket) }
        case .repair(let key, _):
            if stored, let tickets = repairWaiters.removeValue(forKey: key) { actions += tickets.map { .releaseTicket($0) } }
        }
    }

    // MARK: Fencing

    /// The gap `from..<to` before a write of this owner (tagged `tag`) was read back: `records`, or nil when it
    /// could not be read (the broker is away: read again each second, given up after a minute).
    public mutating func gapRead(from: Int64, to: Int64, tag: [UInt8], attempt: Int, records: [LogRecord]?, uptime: UInt64) -> [Action] {
        guard var fence, fence.tag == tag, fence.checkingGap, !fence.fenced else { return [] }
        var actions: [Action] = []
        switch records.map({ GapVerdict.judge($0, tag: tag, ownTags: ownTags) }) ?? .unreadable {
        case .clear(let zombies):
            fence.checkingGap = false
            fence.expectedOffset = max(fence.expectedOffset, to)
            self.fence = fence
            if !zombies.isEmpty {
                actions.append(.zombieWritesRewritten(count: zombies.count))
                let decoded = (records ?? []).filter { record in record.key.map { zombies.contains($0) } ?? false }
                    .compactMap { record -> StateRecord? in
                        guard let key = record.key else { return nil }
                        return try? StateRecord.decode(key: key, value: record.value.isEmpty ? nil : record.value)
                    }
                rewrite(decoded, actions: &actions, uptime: uptime)
            }
            applyAcknowledged(actions: &actions, uptime: uptime)
        case .newerOwner:
            fence.checkingGap = false
            self.fence = fence
            supersede(gapFrom: from, gapTo: to, actions: &actions, uptime: uptime)
        case .unreadable:
            if attempt >= 60 {
                fence.checkingGap = false
                self.fence = fence
                supersede(gapFrom: from, gapTo: to, actions: &actions, uptime: uptime)
            } else {
                actions.append(.readGap(from: from, to: to, tag: tag, attempt: attempt + 1, after: 1))
            }
        }
        return actions
    }

    /// The replica stops (its writer is closed) while a gap is being checked: the gap will not be read again. The
    /// writes behind the gap landed in the log, but whether a newer owner wrote before them is unknown, so each is
    /// answered "maybe stored" (the next owner reads the log and decides), and nothing more is applied or written.
    /// Not a supersession: the partition was not taken by another replica as far as this one knows.
    public mutating func gapAbandoned(uptime: UInt64) -> [Action] {
        guard var fence, fence.checkingGap, !fence.fenced else { return [] }
        fence.checkingGap = false
        fence.fenced = true
        self.fence = fence
        endings = [:]
        var actions: [Action] = (fence.waiters.values.map { .resume($0.callback, false) })
        self.fence?.waiters = [:]
        for sequence in inFlight.keys {
            if case .failure? = inFlight[sequence]?.result { continue }
            inFlight[sequence]?.result = .failure(.stopping)
        }
        applyAcknowledged(actions: &actions, uptime: uptime)
        return actions
    }

    /// Superseded: nothing more is applied (the writes in flight fail: they landed after the newer owner's marker,
    /// which every reader skips), served or written; waiters hear no. The driver hears of it first
    /// (``PartitionAction/superseded(gapFrom:gapTo:)``), so that nothing of the partition is committed or released
    /// as done before it gives the partition up.
    private mutating func supersede(gapFrom: Int64, gapTo: Int64, actions: inout [Action], uptime: UInt64) {
        actions.append(.superseded(gapFrom: gapFrom, gapTo: gapTo))
        fence?.fenced = true
        // Their tombstones will not be stored by this replica: the next owner decides (and reports) again.
        endings = [:]
        contents.role = .released
        actions += (fence?.waiters.values.map { .resume($0.callback, false) } ?? [])
        fence?.waiters = [:]
        for sequence in inFlight.keys where inFlight[sequence]?.result == nil {
            inFlight[sequence]?.result = .failure(.superseded)
        }
        applyAcknowledged(actions: &actions, uptime: uptime)
    }

    /// Resumes the confirmation waiters satisfied by the fence's latest confirmation.
    private mutating func resumeConfirmed(actions: inout [Action]) {
        guard let fence, !fence.waiters.isEmpty else { return }
        let ready = fence.waiters.filter { $0.value.after <= fence.confirmedProducedAt }
        for (id, waiter) in ready {
            self.fence?.waiters[id] = nil
            actions.append(.resume(waiter.callback, true))
        }
    }

    /// Answers `callback` true once a write produced at or after `instant` landed where this owner expected it
    /// (no other owner had taken the partition then, so what this replica decided before `instant` stands);
    /// false when it is not the owner, was superseded, or no confirmation came within `timeout` seconds. Writes an
    /// ownership check when no write in flight would confirm it.
    public mutating func confirmOwnership(after instant: UInt64, timeout: Double, callback: Reply, uptime: UInt64) -> [Action] {
        guard contents.role == .owner else { return [.resume(callback, false)] }
        guard var fence else { return [.resume(callback, true)] }
        guard !fence.fenced else { return [.resume(callback, false)] }
        if fence.confirmedProducedAt >= instant { return [.resume(callback, true)] }
        fence.nextWaiter += 1
        let id = fence.nextWaiter
        fence.waiters[id] = (instant, callback)
        self.fence = fence
        var actions: [Action] = []
        let covered = inFlight.values.contains { $0.producedAt >= instant }
        if !covered, !fence.checkingGap { submit(Write(producedAt: uptime, purpose: .ownershipCheck), actions: &actions) }
        actions.append(.schedule(.confirmationTimeout(id), after: timeout))
        return actions
    }

    // MARK: Timers

    public mutating func timerFired(_ timer: PartitionTimer, uptime: UInt64) -> [Action] {
        var actions: [Action] = []
        switch timer {
        case .repair(let key, let delay):
            repair(key, delay: delay, actions: &actions, uptime: uptime)
        case .checkpoint(let app, let path, let ticket, let delay):
            guard contents.role.isActive else { return [.checkpointDropped(app: app)] }
            let value = contents.existingApp(app)?.index.shadow(at: path) ?? .null
            submit(
                Write(record: .shadow(ShadowRecord(app: app, path: path, value: value)), producedAt: uptime,
                    purpose: .shadow(ticket: ticket, retryIn: min(delay * 2, 30))), actions: &actions)
        case .ownershipCheck:
            guard let fence, fence.checkScheduled else { return [] }
            self.fence?.checkScheduled = false
            let latest = fence.waiters.values.map(\.after).max() ?? 0
            guard !fence.waiters.isEmpty, !fence.fenced, !inFlight.values.contains(where: { $0.producedAt >= latest }) else { return [] }
            submit(Write(producedAt: uptime, purpose: .ownershipCheck), actions: &actions)
        case .confirmationTimeout(let id):
            if let waiter = fence?.waiters.removeValue(forKey: id) { actions.append(.resume(waiter.callback, false)) }
        }
        return actions
    }

    // MARK: Repairs

    /// Schedules writing the record of `key` as memory has it after `delay` seconds. One chain per key: a repair
    /// scheduled while one is pending is merged into it, so a broker outage never multiplies the records written.
    public mutating func scheduleRepair(_ key: RetryKey, delay: Double) -> [Action] {
        var actions: [Action] = []
        scheduleRepair(key, delay: delay, actions: &actions)
        return actions
    }

    private mutating func scheduleRepair(_ key: RetryKey, delay: Double, actions: inout [Action]) {
        guard repairs.insert(key).inserted else { return }
        actions.append(.schedule(.repair(key, delay: delay), after: delay))
    }

    private mutating func repair(_ key: RetryKey, delay: Double, actions: inout [Action], uptime: UInt64) {
        repairs.remove(key)
        guard contents.role.isActive else { return }
        // A write of this subscription is in flight: memory does not show it yet, so a record written now from
        // memory would land after it and undo it (an acknowledged create lost). Later, once it is applied.
        if writesPending(of: key) {
            scheduleRepair(key, delay: delay, actions: &actions)
            return
        }
        let record: SubscriptionRecord
        if let settings = contents.existingApp(key.app)?.index.subscription(path: key.path, subscriber: key.subscriber) {
            record = SubscriptionRecord(app: key.app, subscription: Subscription(path: key.path, subscriber: key.subscriber, settings: settings))
        } else if let revoked = contents.revoked[key], !revoked.tombstoned {
            record = .revocation(app: key.app, subscription: revoked.subscription, reason: revoked.reason)
        } else {
            record = .deletion(app: key.app, path: key.path, subscriber: key.subscriber)
        }
        submit(Write(record: .subscription(record), producedAt: uptime, purpose: .repair(key, delay: delay)), actions: &actions)
    }

    /// Rewrites, from memory, the keys of records written by a superseded owner: subscriptions as memory has them
    /// (live, revoked marker or tombstone), shadows with the data memory holds, pending-retry lines through the
    /// driver.
    private mutating func rewrite(_ records: [StateRecord], actions: inout [Action], uptime: UInt64) {
        for record in records {
            switch record {
            case .subscription(let subscription):
                let key = subscription.identity
                if repairs.insert(key).inserted { actions.append(.schedule(.repair(key, delay: 0.5), after: 0)) }
            case .shadow(let shadow):
                guard let value = contents.existingApp(shadow.app)?.index.shadow(at: shadow.path) else { continue }
                submit(
                    Write(record: .shadow(ShadowRecord(app: shadow.app, path: shadow.path, value: value)), producedAt: uptime, purpose: .plain),
                    actions: &actions)
            case .retry(let retry):
                actions.append(.rewriteRetryLine(retry.key))
            }
        }
    }

    /// Produces `write` in decision order.
    private mutating func submit(_ write: Write, actions: inout [Action]) {
        let sequence = nextSequence
        nextSequence += 1
        inFlight[sequence] = write
        let key = write.record?.key ?? OwnerTag.ownerCheckKey
        actions.append(.produce(sequence: sequence, key: key, value: write.record?.value ?? [], tag: fence?.tag ?? marker?.tag))
    }

    // MARK: Revocations

    /// Revokes `subscriptions` of `app` now: removed from matching at once, their markers produced. Returns their
    /// revoke messages, to be queued behind what each line already has.
    private mutating func revoke(
        _ subscriptions: [Subscription], app: AppData, reason: RevocationReason, ticket: UInt64?, now: Double,
        actions: inout [Action], uptime: UInt64
    ) -> [PendingNotification] {
        var revokes: [PendingNotification] = []
        for subscription in subscriptions {
            app.index.unsubscribe(path: subscription.path, subscriber: subscription.subscriber)
            let key = RetryKey(app: app.name, path: subscription.path, subscriber: subscription.subscriber)
            contents.revoked[key] = RevokedSubscription(app: app.name, reason: reason, subscription: subscription, markerSequence: nextSequence)
            submit(
                Write(
                    record: .subscription(.revocation(app: app.name, subscription: subscription, reason: reason)), producedAt: uptime,
                    purpose: .marker(key, ticket: ticket)), actions: &actions)
            revokes.append(
                PendingNotification(
                    app: app.name, path: subscription.path, subscriber: subscription.subscriber,
                    format: subscription.settings.format, encryption: subscription.settings.encryption, content: .revoke(reason), scope: app.name, firstFailureAt: now))
        }
        return revokes
    }

    /// Revokes, now, the subscriptions `select` picks in `app` for each reason (the settings-driven revocations:
    /// expired, disabled, rules, a lowered shadow limit); `select` may record what it checked in the app's data.
    /// Returns how many per reason, and the offset of the last change event matched before this revocation point.
    public mutating func revoke(
        app name: String, now: Double, uptime: UInt64, select: (AppData) -> [(RevocationReason, [Subscription])]
    ) -> (counts: [(RevocationReason, Int)], afterOffset: Int64, actions: [Action]) {
        guard contents.role == .owner, let app = contents.existingApp(name) else { return ([], contents.lastEventOffset, []) }
        var actions: [Action] = []
        var counts: [(RevocationReason, Int)] = []
        var revokes: [PendingNotification] = []
        var done: Set<RetryKey> = []
        for (reason, chosen) in select(app) {
            let fresh = chosen.filter { done.insert(RetryKey(app: name, path: $0.path, subscriber: $0.subscriber)).inserted }
            guard !fresh.isEmpty else { continue }
            revokes += revoke(fresh, app: app, reason: reason, ticket: nil, now: now, actions: &actions, uptime: uptime)
            counts.append((reason, fresh.count))
        }
        if !revokes.isEmpty { actions.append(.deliver(revokes)) }
        return (counts, contents.lastEventOffset, actions)
    }

    /// The revoke of `key` was delivered (or discarded at its deadline): writes the tombstone, unless the
    /// subscription was made again since (it is not revoked any more) or a write about it is in flight. Once the
    /// tombstone is stored, the app's event hook hears of the revocation (``PartitionAction/subscriptionEnded(_:)``).
    public mutating func revokeDelivered(_ key: RetryKey, uptime: UInt64) -> [Action] {
        guard contents.role.isActive, let revoked = contents.revoked[key], !revoked.tombstoned, !writesPending(of: key) else { return [] }
        contents.revoked[key]?.tombstoned = true
        var actions: [Action] = []
        endings[key] = (EndedSubscription(app: key.app, subscription: revoked.subscription, cause: .revoked(revoked.reason)), nextSequence)
        submit(
            Write(record: .subscription(.deletion(app: key.app, path: key.path, subscriber: key.subscriber)), producedAt: uptime, purpose: .plain),
            actions: &actions)
        return actions
    }

    /// The provider says `key`'s token is dead (`answer`): the subscription is deleted (no revoke message: nothing
    /// can reach the device). Its end is reported once the tombstone is stored, when it was live or revoked here (not
    /// when it was already gone).
    public mutating func tokenDead(_ key: RetryKey, answer: ProviderAnswer, uptime: UInt64) -> [Action] {
        guard contents.role.isActive else { return [] }
        var ended: EndedSubscription?
        if let settings = contents.existingApp(key.app)?.index.subscription(path: key.path, subscriber: key.subscriber) {
            let subscription = Subscription(path: key.path, subscriber: key.subscriber, settings: settings)
            ended = EndedSubscription(app: key.app, subscription: subscription, cause: .tokenDead(answer, revoking: nil))
        } else if let revoked = contents.revoked[key], !revoked.tombstoned {
            ended = EndedSubscription(app: key.app, subscription: revoked.subscription, cause: .tokenDead(answer, revoking: revoked.reason))
        }
        contents.existingApp(key.app)?.index.unsubscribe(path: key.path, subscriber: key.subscriber)
        contents.revoked[key] = nil
        if let ended { endings[key] = (ended, nextSequence) }
        var actions: [Action] = []
        submit(
            Write(record: .subscription(.deletion(app: key.app, path: key.path, subscriber: key.subscriber)), producedAt: uptime, purpose: .plain),
            actions: &actions)
        return actions
    }

    /// A subscription record produced as `sequence` was stored: an ending waiting for it is reported when it is the
    /// tombstone (or a repair of it), dropped when it is a later state of the subscription (made again: not gone).
    private mutating func reportEnding(_ record: SubscriptionRecord, sequence: UInt64, actions: inout [Action]) {
        let key = record.identity
        guard let ending = endings[key], sequence >= ending.after else { return }
        endings[key] = nil
        if record.settings == nil { actions.append(.subscriptionEnded(ending.ended)) }
    }

    // MARK: Events

    /// Matches one change event (in log order): revokes the app's subscriptions expired by `now` first (so an
    /// expiry's revocation point is exact: matching skips them from here on), updates the shadows, revokes what
    /// the event makes invalid (`too_big` beyond `shadowLimit`, `namespace_does_not_exist`), queues every
    /// notification in this order, and checkpoints the changed shadows. Each notification and each state write
    /// holds `ticket` until it is settled. `v1Payload` builds a v1 payload once per node and size limit
    /// (``V1PayloadCache``; nil: too large, dropped).
    public mutating func match(
        _ event: ChangeEvent, offset: Int64, shadowLimit: Int, now: Int64, eventTime: Double?, ticket: UInt64, uptime: UInt64,
        v1Payload: (DataPath, SubscriberKey, NotificationContent) -> [UInt8]?
    ) -> (outcome: EventOutcome, actions: [Action]) {
        guard contents.role == .owner else { return (EventOutcome(), []) }
        var actions: [Action] = []
        let clock = Double(now)
        let app = contents.app(event.app)
        var revokes: [PendingNotification] = []
        var markers = 0
        // Expiry takes effect at a point too: what has expired by `now` is revoked before this event is matched
        // (matching skips it from now on), not silently skipped until the next sweep.
        let expired = app.index.expiredSubscriptions(now: now)
        let afterOffset = contents.lastEventOffset
        var held: [Action] = []
        if !expired.isEmpty {
            markers += expired.count
            revokes += revoke(expired, app: app, reason: .expired, ticket: ticket, now: clock, actions: &held, uptime: uptime)
        }
        contents.lastEventOffset = offset
        app.dataReplaced(at: event.path)
        var matched = app.index.apply(event, now: now)
        var checkpoints: [ShadowRecord] = []
        // NAMESPACE_DELETED: the index removed everything and returned the revocations.
        if event.operation == .namespaceDeleted {
            let removed = matched.flatMap { notification in notification.recipients.map { (notification.path, $0) } }
            matched = []
            for (path, recipient) in removed {
                let subscription = Subscription(
                    path: path, subscriber: recipient.subscriber, settings: SubscriptionSettings(
                        mode: .noData, format: recipient.format, expiresAt: 0, encryption: recipient.encryption))
                markers += 1
                revokes += revoke(
                    [subscription], app: app, reason: .namespaceDoesNotExist, ticket: ticket, now: clock, actions: &held, uptime: uptime)
            }
        }
        for (path, value) in app.index.changedShadows {
            let record = ShadowRecord(app: event.app, path: path, value: value)
            guard record.exceeds(limit: shadowLimit) else {
                checkpoints.append(record)
                continue
            }
            // The node's data outgrew the app's limit: its value/childEvent subscriptions are revoked, and get the
            // revocation instead of this event's notification.
            let gone = app.index.dataSubscriptions(at: path)
            let goneSubscribers = Set(gone.map(\.subscriber))
            matched = matched.compactMap { notification in
                guard notification.path == path else { return notification }
                var kept = notification
                kept.recipients.removeAll { goneSubscribers.contains($0.subscriber) }
                return kept.recipients.isEmpty ? nil : kept
            }
            markers += gone.count
            for subscription in gone {
                revokes += revoke([subscription], app: app, reason: .tooBig, ticket: ticket, now: clock, actions: &held, uptime: uptime)
            }
            app.markOversized(path)
        }
        var queued: [PendingNotification] = []
        for notification in matched {
            var v1Bytes = V1PayloadCache()
            for recipient in notification.recipients {
                var bytes: [UInt8]?
                if recipient.format == .v1 {
                    bytes = v1Bytes.bytes(for: recipient.subscriber) { v1Payload(notification.path, recipient.subscriber, notification.content) }
                    guard bytes != nil else { continue }
                }
                var pending = PendingNotification(
                    app: app.name, path: notification.path, subscriber: recipient.subscriber, format: recipient.format,
                    encryption: recipient.encryption,
                    content: notification.content, scope: app.name, origin: event.eventID, firstFailureAt: clock)
                pending.payload = bytes
                pending.holds = [ticket]
                pending.eventTime = eventTime
                queued.append(pending)
            }
        }
        // The ticket first (nothing may release it before), then the notifications (decided before the revocations
        // this event caused), the revokes, and the records.
        let holds = queued.count + markers + checkpoints.count
        if holds > 0 { actions.append(.retainTicket(ticket, count: holds)) }
        if !queued.isEmpty || !revokes.isEmpty { actions.append(.deliver(queued + revokes)) }
        actions += held
        for record in checkpoints {
            submit(Write(record: .shadow(record), producedAt: uptime, purpose: .shadow(ticket: ticket, retryIn: 1)), actions: &actions)
        }
        let outcome = EventOutcome(
            notifications: queued.count, revoked: revokes.count - expired.count, expired: expired.count, afterOffset: afterOffset)
        return (outcome, actions)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
