import CurlHTTP
import Foundation
import GatewayAPI
import XCTest

@testable import Gateway

/// The hop between replicas (issue 17): what is forwarded, how it is signed, what a members record may say.
final class ClusterHopTests: XCTestCase {
    let key = ClusterKey(secrets: [Array("a-cluster-secret-of-at-least-32-bytes!!".utf8)])

    func call(_ target: String = "/base/app/.wakeup/x?id=t", body: [UInt8] = []) -> ForwardedRequest {
        ForwardedRequest(
            method: "PUT", pathAndQuery: target,
            headers: [("x-push-forwarded", "1"), ("x-push-client-address", "203.0.113.7"), ("authorization", "Bearer abc")], body: body)
    }

    func signed(_ request: ForwardedRequest, by key: ClusterKey, at now: Int64) -> ForwardedRequest {
        var request = request
        request.headers.append((ClusterKey.hopHeader, key.signHop(request, nowMs: now)))
        return request
    }

    // MARK: Sending a call again

    /// A call is sent again (to the owner the view names next) only when it certainly never reached the owner, or
    /// when it is a read whose connection failed without timing out. libcurl's own resend on a new connection can
    /// end in "connection refused" after the call was written on the old one: then a write is not sent again (its
    /// outcome is unknown: 504), a read is.
    func testOnlyACallTheOwnerNeverReadOrAReadIsSentAgain() {
        let refused = HTTPClientError(code: .transport, curlCode: 7, message: "Couldn't connect to server")
        let refusedAfterWriting = HTTPClientError(
            code: .transport, curlCode: 7, message: "Recv failure: Connection reset by peer", requestBytesSent: 347)
        let reset = HTTPClientError(code: .transport, curlCode: 56, message: "Recv failure", requestBytesSent: 347)
        // A write sent once whose connection the owner reset before reading it (libcurl's resend stopped: 42).
        let resetUnread = HTTPClientError(
            code: .transport, curlCode: 42, message: "Recv failure: Connection reset by peer", requestBytesSent: 1422,
            wasNotRead: true)
        let timedOut = HTTPClientError(code: .transport, curlCode: 28, message: "Operation timed out", requestBytesSent: 347)
        let overloaded = HTTPClientError(code: .overloaded, message: "queue full")
        func verdicts(_ method: String) -> [Bool] {
            let request = ForwardedRequest(method: method, pathAndQuery: "/datasync/v2/app/subscriptions/u", headers: [], body: [])
            return [refused, refusedAfterWriting, reset, timedOut, overloaded, resetUnread].map { RequestRouter.maySendAgain(request, after: $0) }
        }
        for write in ["POST", "PUT", "PATCH", "DELETE"] {
            XCTAssertEqual(verdicts(write), [true, false, false, false, true, true], write)
        }
        for read in ["GET", "HEAD"] {
            XCTAssertEqual(verdicts(read), [true, true, true, false, true, true], read)
        }
    }

    // MARK: Signatures

    func testASignedCallIsAuthenticOnceAndCarriesItsClient() {
        let now: Int64 = 1_800_000_000_000
        let request = signed(call(), by: key, at: now)
        XCTAssertEqual(key.verifyHop(request, nowMs: now + 10), .authentic(client: "203.0.113.7"))
        XCTAssertEqual(key.verifyHop(request, nowMs: now + 20), .rejected(reason: "replayed"))
    }

    func testEveryPartOfTheCallIsSigned() {
        let now: Int64 = 1_800_000_000_000
        let request = signed(call(body: Array("{}".utf8)), by: key, at: now)
        func tampered(_ change: (inout ForwardedRequest) -> Void) -> HopVerdict {
            var copy = request
            change(&copy)
            return ClusterKey(secrets: [Array("a-cluster-secret-of-at-least-32-bytes!!".utf8)]).verifyHop(copy, nowMs: now)
        }
        XCTAssertEqual(tampered { $0.method = "DELETE" }, .rejected(reason: "bad_signature"))
        XCTAssertEqual(tampered { $0.pathAndQuery = "/base/app/.wakeup/y?id=t" }, .rejected(reason: "bad_signature"))
        XCTAssertEqual(tampered { $0.body = Array("{ }".utf8) }, .rejected(reason: "bad_signature"))
        XCTAssertEqual(
            tampered { request in
                request.headers = request.headers.map { $0.name == "x-push-client-address" ? ($0.name, "10.0.0.1") : $0 }
            }, .rejected(reason: "bad_signature"))
        XCTAssertEqual(
            tampered { request in request.headers = request.headers.map { $0.name == "authorization" ? ($0.name, "Bearer xyz") : $0 } },
            .rejected(reason: "bad_signature"))
    }

    func testUnsignedMalformedStaleAndForeignCallsAreRefused() {
        let now: Int64 = 1_800_000_000_000
        XCTAssertEqual(key.verifyHop(call(), nowMs: now), .rejected(reason: "unsigned"))
        var malformed = call()
        malformed.headers.append((ClusterKey.hopHeader, "v1;t=x;n=1;s=!!"))
        XCTAssertEqual(key.verifyHop(malformed, nowMs: now), .rejected(reason: "malformed"))
        XCTAssertEqual(key.verifyHop(signed(call(), by: key, at: now - 61_000), nowMs: now), .rejected(reason: "stale"))
        XCTAssertEqual(key.verifyHop(signed(call(), by: key, at: .min), nowMs: now), .rejected(reason: "stale"))
        XCTAssertEqual(key.verifyHop(signed(call(), by: key, at: .max), nowMs: now), .rejected(reason: "stale"))
        let other = ClusterKey(secrets: [Array("another-secret-of-at-least-32-bytes!!!!".utf8)])
        XCTAssertEqual(key.verifyHop(signed(call(), by: other, at: now), nowMs: now), .rejected(reason: "bad_signature"))
    }

    func testARotationAcceptsBothSecretsAndSignsWithTheFirst() {
        let now: Int64 = 1_800_000_000_000
        let old = Array("the-old-cluster-secret-at-least-32-bytes".utf8)
        let new = Array("the-new-cluster-secret-at-least-32-bytes".utf8)
        let rotating = ClusterKey(secrets: [new, old])
        XCTAssertEqual(rotating.verifyHop(signed(call(), by: ClusterKey(secrets: [old]), at: now), nowMs: now), .authentic(client: "203.0.113.7"))
        XCTAssertEqual(
            ClusterKey(secrets: [new]).verifyHop(signed(call(), by: rotating, at: now), nowMs: now), .authentic(client: "203.0.113.7"))
        let value = Array("{}".utf8)
        let header = rotating.signMember(key: Array("i".utf8), value: value)
        XCTAssertTrue(ClusterKey(secrets: [new]).verifyMember(key: Array("i".utf8), value: value, signature: header.value))
        XCTAssertFalse(ClusterKey(secrets: [old]).verifyMember(key: Array("i".utf8), value: value, signature: header.value))
        XCTAssertFalse(rotating.verifyMember(key: Array("j".utf8), value: value, signature: header.value), "signed for another key")
    }

    func testShortOrMissingSecretsAreConfigurationErrors() throws {
        var cluster = GatewayConfiguration.Cluster()
        XCTAssertNil(try cluster.resolvedKey())
        cluster.secret = "short"
        XCTAssertThrowsError(try cluster.resolvedKey())
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-\(UUID().uuidString)")
        try "the-new-cluster-secret-at-least-32-bytes\nthe-old-cluster-secret-at-least-32-bytes\n".write(
            to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        cluster.secretFile = file.path
        XCTAssertNotNil(try cluster.resolvedKey())
    }

    // MARK: Members records

    func testMemberAddressesArePlainHostsAndPorts() {
        for good in ["http://10.0.0.5:8080", "https://gw-0.gw.ns.svc:8443", "http://[fd00::1]:8080", "http://localhost:1"] {
            XCTAssertEqual(MemberAddress.validated(good), good, good)
        }
        for bad in [
            "http://user@10.0.0.5:8080", "http://10.0.0.5:8080/", "http://10.0.0.5:8080/x", "http://10.0.0.5:8080?q",
            "http://10.0.0.5:8080#f", "http://10.0.0.5", "http://10.0.0.5:0", "http://10.0.0.5:65536", "ftp://10.0.0.5:21",
            "http://:8080", "http://[fd00::1:8080", "http://a b:80", "10.0.0.5:8080", "http://*@127.0.0.1:80", "http://-x:80",
        ] {
            XCTAssertNil(MemberAddress.validated(bad), bad)
        }
    }

    func testMembersRecordsWithExtremeOrMissingFieldsDecodeOrAreRefusedWithoutTrapping() {
        for updated in ["-9223372036854775808", "9223372036854775807", "0", "99999999999999999999"] {
            let value = Array(
                #"{"address":"http://10.0.0.5:8080","group":"g","owned":[0],"ready":[0],"seq":1,"updatedAtMs":\#(updated)}"#.utf8)
            let record = MemberRecord.decode(instance: "i", value: value)
            XCTAssertEqual(record?.address, "http://10.0.0.5:8080", updated)
        }
        XCTAssertNil(MemberRecord.decode(instance: "i", value: Array(#"{"address":"http://u@h:1","group":"g","owned":[],"ready":[]}"#.utf8)))
        XCTAssertNil(MemberRecord.decode(instance: "i", value: Array(#"{"address":"http://h:1","group":"g","owned":[-1],"ready":[]}"#.utf8)))
        XCTAssertNil(MemberRecord.decode(instance: String(repeating: "i", count: 65), value: Array(#"{"address":"http://h:1","group":"g","owned":[],"ready":[]}"#.utf8)))
        XCTAssertNil(MemberRecord.decode(instance: "i", value: Array("not json".utf8)))
    }

    // MARK: Targets

    func testForwardedTargetsAreRebuiltFromCheckedSegments() throws {
        let target = try ForwardTarget(
            target: "/base/a%20pp/.wakeup/x%2Fy/z?id=t&mode=value&evil=1", path: "/base/a%20pp/.wakeup/x%2Fy/z",
            queryParameters: [("id", "t"), ("mode", "value"), ("evil", "1")])
        XCTAssertEqual(target.pathAndQuery, "/base/a%20pp/.wakeup/x%2Fy/z?id=t&mode=value")
        for (raw, path) in [
            ("*@127.0.0.1:9/base/a/.wakeup", "/base/a/.wakeup"), ("//h/base/a/.wakeup", "//h/base/a/.wakeup"),
            ("/base/a/.wakeup/../../metrics", "/base/a/.wakeup/../../metrics"), ("/base/a/.wakeup/%2e%2E/x", "/base/a/.wakeup/%2e%2E/x"),
            ("/base/a/.wakeup/./x", "/base/a/.wakeup/./x"), ("/base/a/.wakeup/%zz", "/base/a/.wakeup/%zz"),
        ] {
            XCTAssertThrowsError(try ForwardTarget(target: raw, path: path, queryParameters: []), raw)
        }
    }
}
