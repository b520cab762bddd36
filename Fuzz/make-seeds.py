#!/usr/bin/env python3
"""Regenerates the seed corpora in Fuzz/Corpus/<target>/ from real examples: the JSON documents and rules of
the test suites, the tokens of the Auth fixtures (made by PyJWT), change events encoded by the end-to-end
suite's own protobuf encoder (tests/e2e/kafka_util.py), state records in the documented formats.

    python3 Fuzz/make-seeds.py      # rewrites Fuzz/Corpus (deterministic)

Each seed is in the input format of its harness (see Fuzz/Sources/<target>/*.swift).
"""
from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzz", "Corpus")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from kafka_util import encode_change_event, json_change_event  # noqa: E402

FAR = 4102444800


def swift_raw_strings(path: str) -> list[str]:
    """The single-line raw string literals #"..."# of a Swift file, unescaped the way Swift reads them."""
    with open(path, encoding="utf-8") as f:
        return re.findall(r'#"(.*?)"#', f.read())


def valid_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def write(target: str, seeds: list[bytes]) -> None:
    """Replaces the generated seeds of ``target``; inputs kept by hand (``regression-*``: crashes found by
    fuzzing, which must keep passing) stay."""
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        if not name.startswith("regression-"):
            os.remove(os.path.join(directory, name))
    unique = {hashlib.sha1(seed).hexdigest()[:16]: seed for seed in seeds}
    for name, seed in sorted(unique.items()):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(seed)
    print(f"{target}: {len(unique)} seeds")


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_seeds() -> list[bytes]:
    seeds = []
    with open(os.path.join(ROOT, "docs", "openapi.json"), "rb") as f:
        seeds.append(f.read())
    for path in sorted(glob.glob(os.path.join(ROOT, "Tests", "**", "*.swift"), recursive=True)):
        for text in swift_raw_strings(path):
            if text.strip()[:1] in ("{", "[", '"') or valid_json(text):
                seeds.append(text.encode())
    seeds += [s.split(b"\0", 1)[1] for s in state_seeds() if b"\0" in s]
    seeds += [compact(c).encode() for c in CLAIMS]
    seeds += [b"", b"null", b"-0.1e+3", b'"\\ud83d\\ude00"', b"[[[[[]]]]]", b"{" + b'"a":{' * 40 + b"}" * 41]
    return seeds


EVENTS = [
    ("toto", "/chat", "SET", '{"m1":"hi"}', None),
    ("toto", "/chat/m2", "SET", '"hello"', None),
    ("toto", "/users/alice/inbox", "MERGE", '{"a":1,"b":null,"c":{"d":[1,2,3]}}', '{"a":0}'),
    ("toto", "/users/alice/inbox/m1", "REMOVE", None, '"old"'),
    ("toto", "/rooms/r1", "SNAPSHOT", '{"members":{"alice":true,"bob":true}}', None),
    ("toto", "/", "NAMESPACE_DELETED", None, None),
    ("toto", "/ünï cödé/ key", "SET", '{"é":"😀","n":-1.5e3}', None),
    ("demo", "/big", "SET", json.dumps("z" * 2900), None),
    ("toto", "/a/b/c/d/e/f/g/h", "SET", "true", "false"),
]


def event_seeds() -> list[bytes]:
    seeds = []
    for app, path, op, after, before in EVENTS:
        value = encode_change_event(app, path, op, after, before, "0f1e2d3c4b5a69788796a5b4c3d2e1f0", 1767225600123)
        seeds += [bytes([0]) + value, bytes([4]) + value, bytes([8]) + value]
        text = json_change_event(app, path, op, after, before, "evt-1", 1767225600123)
        seeds += [bytes([1]) + text, bytes([5]) + text]
    return seeds


def state_seeds() -> list[bytes]:
    """key \\0 value (no \\0: a tombstone), in the formats of SubscriptionRecord, ShadowRecord and RetryRecord."""
    token = "dAbC123:APA91bHUn_x-0123456789abcdef"
    records = []
    for kind, uid, value in [
        ("mobile", "", {"expiresAt": 1767225600, "format": "v1", "mode": "value"}),
        ("mobile", "alice", {"expiresAt": 1767225600, "format": "v2", "mode": "childEvent", "authUID": "alice"}),
        ("huawei", "", {"expiresAt": 1767225600, "format": "v1", "mode": "noData"}),
        ("mobile", "bob", None),
    ]:
        key = compact(["toto", "/users/alice/inbox", kind, token, uid])
        records.append((key, None if value is None else compact(value)))
    records.append((compact(["shadow", "toto", "/users/alice/inbox"]), compact({"m1": "hi", "m2": {"a": [1, 2]}})))
    records.append((compact(["shadow", "toto", "/chat"]), "null"))
    contents = [
        {"t": "noData"},
        {"t": "value", "v": {"a": 1}, "loaded": True},
        {"t": "value", "v": None, "loaded": False},
        {"t": "childEvent", "a": {"m3": "x"}, "r": ["m1"], "c": {"m2": 2}, "keysOnly": False},
        {"t": "revoke", "r": "permission_denied"},
    ]
    entries = [{"attempt": n + 1, "content": c, "first": 1767225600.5, "format": "v2" if n % 2 else "v1",
                "notBefore": 1767225604.25, "origin": f"evt-{n}", "scope": "toto"} for n, c in enumerate(contents)]
    retry_key = compact(["retry", "toto", "/users/alice/inbox", "mobile", token, "alice"])
    records.append((retry_key, compact(entries)))
    records.append((retry_key, None))
    return [k.encode() + (b"" if v is None else b"\0" + v.encode()) for k, v in records]


HEADERS = [{"alg": "HS256", "typ": "JWT"}, {"alg": "HS256", "kid": "k1"}, {"alg": "none"}, {"alg": "ES256"},
           {"alg": "RS256", "kid": "rs"}, {"alg": "HS256", "crit": ["exp"]}]
CLAIMS = [
    {"uid": "user-1", "exp": FAR},
    {"sub": "user-2", "exp": FAR, "nbf": 1800000000.25, "iat": 1700000000},
    {"uid": "user-1", "exp": FAR, "iss": "https://issuer.example/p1", "aud": "p1"},
    {"uid": "user-1", "exp": FAR, "iss": "https://issuer.example/p1", "aud": ["other", "p1"]},
    {"uid": 42, "sub": "user-3", "exp": 1.7e9},
    {"uid": "", "exp": "soon"},
    {"uid": "u", "exp": 1e300, "nbf": -1},
    {"uid": "alice", "exp": FAR, "admin": True, "org": {"id": "o1"}},
]


def jwt_seeds() -> list[bytes]:
    seeds = []
    fixtures = os.path.join(ROOT, "Tests", "AuthTests", "JWTVerifierTests.swift")
    with open(fixtures, encoding="utf-8") as f:
        for token in re.findall(r'static let \w+ = "([A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]*)"', f.read()):
            if len(token) < 8192:
                seeds.append(bytes([0]) + token.encode())
    for header in HEADERS:
        for claims in CLAIMS[:4]:
            seeds.append(bytes([1]) + compact(header).encode() + b"\0" + compact(claims).encode())
    seeds += [bytes([2]) + compact(c).encode() for c in CLAIMS]
    seeds += [bytes([3]) + bytes(range(256)), bytes([7]) + bytes(range(64)), bytes([7]) + b"\x30\x44" + bytes(68)]
    return seeds


def rules_seeds() -> list[bytes]:
    seeds = []
    sources = [os.path.join(ROOT, "Tests", "RulesTests", "ReadRulesTests.swift"),
               os.path.join(ROOT, "Tests", "GatewayAPITests", "V2RoutesTests.swift")]
    for path in sources:
        if not os.path.exists(path):
            continue
        for text in swift_raw_strings(path):
            text = text.replace('\\"', '"') if not valid_json(text) and valid_json(text.replace('\\"', '"')) else text
            if valid_json(text) and text.lstrip().startswith("{"):
                seeds.append(bytes([0]) + text.encode())
            elif not text.lstrip().startswith("{"):
                seeds.append(bytes([1]) + text.encode())
    for expression in ["auth != null && auth.uid == $uid", "auth.uid == $uid || auth.admin == true",
                       "!(auth.org.role.name != 'owner') && $room == \"inbox\"", "auth.level == 3", "true", "null"]:
        seeds.append(bytes([1]) + expression.encode())
    seeds.append(bytes([0]) + compact({"rules": {"public": {".read": True},
                                                 "users": {"$uid": {".read": "auth != null && auth.uid == $uid"}}}}).encode())
    return seeds


def main() -> None:
    write("FuzzJSON", json_seeds())
    write("FuzzEventDecoder", event_seeds())
    write("FuzzStateRecord", state_seeds())
    write("FuzzJWT", jwt_seeds())
    write("FuzzRules", rules_seeds())


if __name__ == "__main__":
    main()
