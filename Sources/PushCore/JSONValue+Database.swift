@_exported import CompactJSON

/// JSON values as the realtime database sees them: `null` is the absence of a node, so ``normalized()``
/// removes null members and empty containers (a database holds no null or empty nodes); array elements are
/// children keyed by their index.
extension JSONValue {
    /// The children of this node, keyed as the database keys them (array indices as decimal strings).
    public var children: [ExactString: JSONValue] {
        switch self {
        case .object(let members): return members
        case .array(let elements):
            var result: [ExactString: JSONValue] = [:]
            result.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() where !element.isNull {
                result[ExactString(String(index))] = element
            }
            return result
        default: return [:]
        }
    }

    /// The child at `key`, `.null` when absent.
    public func child(_ key: ExactString) -> JSONValue {
        switch self {
        case .object(let members): return members[key] ?? .null
        case .array(let elements):
            guard let index = Int(key.string), index >= 0, index < elements.count, String(index).bytesEqual(key.string) else {
                return .null
            }
            return elements[index]
        default: return .null
        }
    }

    /// The value at a relative path below this node, `.null` when absent.
    public func value<C: Collection>(at relative: C) -> JSONValue where C.Element == ExactString {
        var node = self
        for key in relative {
            node = node.child(key)
            if node.isNull { return .null }
        }
        return node
    }

    /// This value with the node at `relative` replaced by `newValue` (`.null` removes it), normalised.
    public func setting<C: Collection>(_ newValue: JSONValue, at relative: C) -> JSONValue
    where C.Element == ExactString, C.SubSequence: Collection, C.SubSequence.Element == ExactString {
        guard let first = relative.first else { return newValue.normalized() }
        var members = self.children
        let updated = (members[first] ?? .null).setting(newValue, at: relative.dropFirst())
        members[first] = updated.isNull ? nil : updated
        return members.isEmpty ? .null : .object(members)
    }

    /// This value with `update`'s members merged in (a MERGE write): each member replaces the child of the
    /// same key, a null member removes it.
    public func merging(_ update: [ExactString: JSONValue]) -> JSONValue {
        var members = self.children
        for (key, value) in update {
            let normalized = value.normalized()
            members[key] = normalized.isNull ? nil : normalized
        }
        return members.isEmpty ? .null : .object(members)
    }

    /// The database form of this value: no null members, no empty objects or arrays.
    public func normalized() -> JSONValue {
        switch self {
        case .object(let members):
            var result: [ExactString: JSONValue] = [:]
            result.reserveCapacity(members.count)
            for (key, value) in members {
                let normalized = value.normalized()
                if !normalized.isNull { result[key] = normalized }
            }
            return result.isEmpty ? .null : .object(result)
        case .array(let elements):
            if elements.isEmpty { return .null }
            return .array(elements.map { $0.normalized() })
        default:
            return self
        }
    }
}
