import CompactJSON

/// One replica as the members topic (`kafka.membersTopic`, compacted, one partition) knows it: where its API
/// answers, which change partitions the consumer group gave it and which of those it has loaded. Key: the
/// replica's instance id; a tombstone when it stops. Signed with the cluster secret (a `pgw-sig` header,
/// ``ClusterKey``).
///
///     {"address":"http://10.0.0.5:8080","group":"push-gateway","owned":[0,3],"ready":[0],"seq":42,"updatedAtMs":1767225600000}
///
/// `seq` counts the records of one instance (a replayed older record is ignored); `updatedAtMs` is the writer's
/// clock, for people reading the topic only: liveness is judged by when a record is received, and which of two
/// claims of a partition is newer by their order in the topic.
struct MemberRecord: Sendable, Equatable {
    var instance: String
    var group: String
    var address: String
    var owned: [Int32]
    var ready: [Int32]
    var seq: Int64
    var updatedAtMs: Int64

    /// Partitions listed in one record at most (a topic has far fewer).
    static let maximumPartitions = 100_000

    var value: [UInt8] {
        JSONWriter.bytes(
            .object([
                "address": .string(address), "group": .string(group),
                "owned": .array(owned.map { .number(String($0)) }), "ready": .array(ready.map { .number(String($0)) }),
                "seq": .number(String(seq)), "updatedAtMs": .number(String(updatedAtMs)),
            ]))
    }

    /// The record, or nil when anything in it is not what a replica writes: the address must be a plain
    /// `http(s)://host:port` (``MemberAddress``), partitions non-negative and at most ``maximumPartitions``.
    static func decode(instance: String, value: [UInt8]) -> MemberRecord? {
        guard instance.utf8.count <= 64, let document = try? JSONParser.parse(value), let rawAddress = document["address"]?.stringValue,
            let address = MemberAddress.validated(rawAddress), let group = document["group"]?.stringValue,
            let owned = document["owned"]?.arrayValue, let ready = document["ready"]?.arrayValue,
            owned.count <= maximumPartitions, ready.count <= maximumPartitions
        else { return nil }
        func integer(_ name: String) -> Int64? {
            guard case .number(let lexeme)? = document[name] else { return nil }
            return Int64(lexeme)
        }
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
            seq: integer("seq") ?? 0, updatedAtMs: integer("updatedAtMs") ?? 0)
    }
}

/// A replica's advertised address: `http://` or `https://`, a host (a DNS name, an IPv4 address or a bracketed
/// IPv6 address) and a port, nothing else: no userinfo, path, query or fragment. Checked in the configuration
/// (`http.advertisedAddress`) and in every members record read, since a forwarded call is sent there.
enum MemberAddress {
    static func validated(_ text: String) -> String? {
        let rest: Substring
        if text.hasPrefix("http://") {
            rest = text.dropFirst(7)
        } else if text.hasPrefix("https://") {
            rest = text.dropFirst(8)
        } else {
            return nil
        }
        guard rest.utf8.count <= 300 else { return nil }
        let host: Substring
        let portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            guard after.hasPrefix(":") else { return nil }
            portText = after.dropFirst()
            guard !host.isEmpty, host.utf8.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else {
                return nil
            }
        } else {
            guard let colon = rest.lastIndex(of: ":") else { return nil }
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
            guard !host.isEmpty, host.utf8.count <= 253, host.utf8.first != UInt8(ascii: "."), host.utf8.first != UInt8(ascii: "-"),
                host.utf8.allSatisfy({ isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") })
            else { return nil }
        }
        guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let port = Int(portText), (1...65535).contains(port)
        else { return nil }
        return text
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }
}
