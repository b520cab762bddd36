extension ChildChanges {
    /// The changes of `self` followed by those of `later`, as one set of changes, key by key:
    ///
    /// | earlier \ later | added(v) | changed(v) | removed |
    /// | --- | --- | --- | --- |
    /// | (none) | added(v) | changed(v) | removed |
    /// | added | added(v) | added(v) | (gone) |
    /// | changed | changed(v) | changed(v) | removed |
    /// | removed | changed(v) | changed(v) | removed |
    ///
    /// A later value always wins. Add-then-remove cancels; remove-then-add is a change (the child existed
    /// before and exists after). The inconsistent cells (added twice, removed then changed) keep the later
    /// value with the kind that matches the state before the earlier change.
    public func merged(with later: ChildChanges) -> ChildChanges {
        var added = self.added
        var changed = self.changed
        var removed = Set(self.removed)
        for (key, value) in later.added {
            if removed.remove(key) != nil || changed[key] != nil {
                changed[key] = value
            } else {
                added[key] = value
            }
        }
        for (key, value) in later.changed {
            if added[key] != nil {
                added[key] = value
            } else {
                removed.remove(key)
                changed[key] = value
            }
        }
        for key in later.removed {
            if added.removeValue(forKey: key) != nil {
                // Added then removed: nothing happened to this child.
                changed.removeValue(forKey: key)
            } else {
                changed.removeValue(forKey: key)
                removed.insert(key)
            }
        }
        return ChildChanges(added: added, removed: Array(removed), changed: changed)
    }
}

extension NotificationContent {
    /// What pending `self` and a `later` notification of the same subscription become while the subscription
    /// backs off (SPEC §8).
    public enum Coalescing: Sendable, Equatable {
        /// Both are sent, in order.
        case keepBoth
        /// One notification with this content replaces both.
        case combined(NotificationContent)
        /// The two cancel out (childEvent changes with no net effect): neither is sent.
        case cancelled
    }

    /// `noData` then `noData`, `value` then `value`: the later one. `childEvent` then `childEvent`: the merged
    /// changes (``ChildChanges/merged(with:)``), `keysOnly` when either is. Anything else, and any `revoke`,
    /// is kept.
    public func coalescing(with later: NotificationContent) -> Coalescing {
        switch (self, later) {
        case (.noData, .noData), (.value, .value):
            return .combined(later)
        case (.childEvent(let earlier, let earlierKeysOnly), .childEvent(let next, let nextKeysOnly)):
            let merged = earlier.merged(with: next)
            if merged.isEmpty { return .cancelled }
            return .combined(.childEvent(merged, keysOnly: earlierKeysOnly || nextKeysOnly))
        default:
            return .keepBoth
        }
    }
}
