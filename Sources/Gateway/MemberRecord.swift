import CompactJSON

/// One replica as the members topic (`kafka.membersTopic`, compacted, one partition) knows it: where its API
/// answers, which change partitions the consumer group gave it and which of those it has loaded. Key: the
/// replica's instance id; a tombstone when it stops.
///
///     {"address":"http://10.0.0.5:8080","group":"push-gateway","owned":[0,3],"ready":[0],"updatedAtMs":1767225600000}
struct MemberRecord: Sendable, Equatable {
    var instance: String
    var group: String
    var address: String
    var owned: [Int32]
    var ready: [Int32]
    var updatedAtMs: Int64

    var value: [UInt8] {
        JSONWriter.bytes(
            .object([
                "address": .string(address), "group": .string(group),
                "owned": .array(owned.map { .number(String($0)) }), "ready": .array(ready.map { .number(String($0)) }),
                "updatedAtMs": .number(String(updatedAtMs)),
            ]))
    }

    static func decode(instance: String, value: [UInt8]) -> MemberRecord? {
        guard let document = try? JSONParser.parse(value), let address = document["address"]?.stringValue,
            let group = document["group"]?.stringValue, let owned = document["owned"]?.arrayValue,
            let ready = document["ready"]?.arrayValue,
            case .number(let updated)? = document["updatedAtMs"], let updatedAtMs = Int64(updated)
        else { return nil }
        func partitions(_ values: [JSONValue]) -> [Int32]? {
            var result: [Int32] = []
            for value in values {
                guard case .number(let lexeme) = value, let partition = Int32(lexeme), partition >= 0 else { return nil }
                result.append(partition)
            }
            return result
        }
        guard let ownedPartitions = partitions(owned), let readyPartitions = partitions(ready) else { return nil }
        return MemberRecord(
            instance: instance, group: group, address: address, owned: ownedPartitions, ready: readyPartitions,
            updatedAtMs: updatedAtMs)
    }
}
