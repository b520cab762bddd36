#!/usr/bin/env python3
"""Regenerates the fixtures embedded in JWTVerifierTests.swift with independent implementations
(PyJWT + cryptography; a few deliberately broken tokens are assembled by hand with hmac / cryptography).

    pip install PyJWT==2.15.1 cryptography==50.0.2   # if `python3 -c 'import jwt'` fails
    python3 Tests/AuthTests/make_fixtures.py          # rewrites the block between the markers

Keys are fresh on every run; the tests only rely on the relations between keys and tokens.
"""
import base64
import hashlib
import hmac
import json
import os
import re
import sys
import warnings

import jwt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

FAR = 4102444800  # 2100-01-01
TEST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "JWTVerifierTests.swift")
BEGIN, END = "    // BEGIN GENERATED FIXTURES (make_fixtures.py)", "    // END GENERATED FIXTURES"


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def spki_pem(public_key) -> str:
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def compact(header: dict | str, payload: dict | str | bytes, sign) -> str:
    """Hand-made compact JWS: header / payload given as dicts (compact JSON) or exact text."""
    h = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    p = payload if isinstance(payload, (str, bytes)) else json.dumps(payload, separators=(",", ":"))
    p = p.encode() if isinstance(p, str) else p
    signing_input = b64u(h.encode()) + "." + b64u(p)
    return signing_input + "." + b64u(sign(signing_input.encode()))


def hs(secret: bytes):
    return lambda message: hmac.new(secret, message, hashlib.sha256).digest()


def main() -> None:
    warnings.simplefilter("ignore")  # PyJWT's short-key warnings (HS512 fixture)
    hs1_secret = "pushgateway test secret: 0123456789abcdef0123456789abcdef"
    hs2_secret = os.urandom(32)
    rs1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rs2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    es1 = ec.generate_private_key(ec.SECP256R1())
    es2 = ec.generate_private_key(ec.SECP256R1())
    p384 = ec.generate_private_key(ec.SECP384R1())
    k256 = ec.generate_private_key(ec.SECP256K1())
    rs1_pem, rs2_pem = spki_pem(rs1.public_key()), spki_pem(rs2.public_key())
    es1_pem, es2_pem = spki_pem(es1.public_key()), spki_pem(es2.public_key())
    hs1 = hs1_secret.encode()

    def enc(claims, key, alg, kid=None, headers=None):
        extra = dict(headers or {})
        if kid is not None:
            extra["kid"] = kid
        return jwt.encode(claims, key, algorithm=alg, headers=extra or None)

    user = {"uid": "user-1", "sub": "subject-1", "exp": FAR, "iat": 1700000000, "scope": "push"}
    tokens: dict[str, str] = {}
    # Accepted.
    tokens["hs256"] = enc(user, hs1, "HS256", "hs-1")
    tokens["hs256Binary"] = enc({"sub": "user-2", "exp": FAR}, hs2_secret, "HS256", "hs-2")
    tokens["hs256NoKid"] = enc({"sub": "user-2", "exp": FAR}, hs2_secret, "HS256")
    tokens["rs256"] = enc({"sub": "user-rs", "exp": FAR}, rs1, "RS256", "rs-1")
    tokens["rs256NoKidKey2"] = enc({"sub": "user-rs2", "exp": FAR}, rs2, "RS256")
    tokens["es256"] = enc({"uid": "user-es", "exp": FAR}, es1, "ES256", "es-1")
    tokens["es256NoKid"] = enc({"uid": "user-es", "exp": FAR}, es1, "ES256")
    # Wrong keys / kids.
    tokens["rs256SignedByKey2WithKid1"] = enc({"sub": "user-rs", "exp": FAR}, rs2, "RS256", "rs-1")
    tokens["es256SignedByKey2WithKid1"] = enc({"uid": "user-es", "exp": FAR}, es2, "ES256", "es-1")
    tokens["hs256WrongSecret"] = enc(user, b"another secret, 32 bytes or more.....", "HS256", "hs-1")
    tokens["rs256UnknownKid"] = enc({"sub": "user-rs", "exp": FAR}, rs1, "RS256", "rs-9")
    tokens["es256WithRSAKid"] = enc({"uid": "user-es", "exp": FAR}, es1, "ES256", "rs-1")
    # ES256 with an ASN.1 DER signature instead of r||s.
    tokens["es256DERSignature"] = compact(
        {"alg": "ES256", "kid": "es-1"}, {"uid": "user-es", "exp": FAR},
        lambda m: es1.sign(m, ec.ECDSA(hashes.SHA256())))
    # Algorithms.
    tokens["algNone"] = jwt.encode({"uid": "root", "exp": FAR}, None, algorithm="none")
    tokens["hs512"] = enc({"uid": "user-1", "exp": FAR}, hs1, "HS512", "hs-1")
    # Algorithm confusion: HS256 keyed with the exact RSA / EC public key PEM text the app is configured with
    # (PyJWT refuses to do this, hence by hand).
    tokens["confusionRSAPEMKid"] = compact({"alg": "HS256", "kid": "rs-1", "typ": "JWT"},
                                           {"uid": "root", "exp": FAR}, hs(rs1_pem.encode()))
    tokens["confusionRSAPEMNoKid"] = compact({"alg": "HS256", "typ": "JWT"},
                                             {"uid": "root", "exp": FAR}, hs(rs1_pem.encode()))
    tokens["confusionECPEMNoKid"] = compact({"alg": "HS256"}, {"uid": "root", "exp": FAR}, hs(es1_pem.encode()))
    # Time.
    tokens["expired"] = enc({"uid": "user-1", "exp": 1700000000}, hs1, "HS256", "hs-1")
    tokens["expDecimal"] = compact({"alg": "HS256", "kid": "hs-1"}, '{"uid":"user-1","exp":1700000000.5}', hs(hs1))
    tokens["expExponent"] = compact({"alg": "HS256", "kid": "hs-1"}, '{"uid":"user-1","exp":1.7e9}', hs(hs1))
    tokens["notBefore"] = enc({"uid": "user-1", "exp": FAR, "nbf": 1800000000}, hs1, "HS256", "hs-1")
    tokens["nbfDecimal"] = compact({"alg": "HS256", "kid": "hs-1"},
                                   '{"uid":"user-1","exp":4102444800,"nbf":1800000000.25}', hs(hs1))
    tokens["missingExp"] = enc({"uid": "user-1", "iat": 1700000000}, hs1, "HS256", "hs-1")
    tokens["expString"] = compact({"alg": "HS256", "kid": "hs-1"}, {"uid": "user-1", "exp": str(FAR)}, hs(hs1))
    tokens["expHuge"] = compact({"alg": "HS256", "kid": "hs-1"}, '{"uid":"user-1","exp":1e300}', hs(hs1))
    tokens["nbfString"] = compact({"alg": "HS256", "kid": "hs-1"},
                                  {"uid": "user-1", "exp": FAR, "nbf": "soon"}, hs(hs1))
    # User id.
    tokens["subOnly"] = enc({"sub": "subject-only", "exp": FAR}, hs1, "HS256", "hs-1")
    tokens["uidEmptySub"] = enc({"uid": "", "sub": "subject-2", "exp": FAR}, hs1, "HS256", "hs-1")
    tokens["uidNumberSub"] = enc({"uid": 42, "sub": "subject-3", "exp": FAR}, hs1, "HS256", "hs-1")
    tokens["uidNullSub"] = enc({"uid": None, "sub": "subject-4", "exp": FAR}, hs1, "HS256", "hs-1")
    tokens["noUID"] = enc({"name": "nobody", "exp": FAR}, hs1, "HS256", "hs-1")
    # Issuer and audience (the tests configure ISSUER / AUDIENCE).
    iss, aud = "https://issuer.example/project-1", "project-1"
    tokens["issAud"] = enc({"uid": "user-1", "exp": FAR, "iss": iss, "aud": aud}, hs1, "HS256", "hs-1")
    tokens["issAudArray"] = enc({"uid": "user-1", "exp": FAR, "iss": iss, "aud": ["other", aud]}, hs1, "HS256", "hs-1")
    tokens["rs256IssAud"] = enc({"sub": "user-rs", "exp": FAR, "iss": iss, "aud": [aud]}, rs1, "RS256", "rs-1")
    tokens["otherIssuer"] = enc({"uid": "user-1", "exp": FAR, "iss": iss[:-1] + "2", "aud": aud}, hs1, "HS256", "hs-1")
    tokens["otherAudience"] = enc({"uid": "user-1", "exp": FAR, "iss": iss, "aud": "project-2"}, hs1, "HS256", "hs-1")
    tokens["audArrayWithout"] = enc({"uid": "user-1", "exp": FAR, "iss": iss, "aud": ["project-2", "project-3"]},
                                    hs1, "HS256", "hs-1")
    tokens["audArrayEmpty"] = enc({"uid": "user-1", "exp": FAR, "iss": iss, "aud": []}, hs1, "HS256", "hs-1")
    tokens["audArrayMixed"] = compact({"alg": "HS256", "kid": "hs-1"},
                                      {"uid": "user-1", "exp": FAR, "iss": iss, "aud": [aud, 7]}, hs(hs1))
    tokens["audNumber"] = compact({"alg": "HS256", "kid": "hs-1"}, {"uid": "user-1", "exp": FAR, "iss": iss, "aud": 7},
                                  hs(hs1))
    tokens["issNumber"] = compact({"alg": "HS256", "kid": "hs-1"}, {"uid": "user-1", "exp": FAR, "iss": 7, "aud": aud},
                                  hs(hs1))
    # Canonically equivalent to the configured issuer / audience but other bytes: K vs KELVIN SIGN (U+212A),
    # precomposed é vs e + COMBINING ACUTE ACCENT.
    tokens["issAudKelvin"] = enc({"uid": "user-1", "exp": FAR, "iss": "https://\u212aate.example", "aud": "caf\u00e9"},
                                 hs1, "HS256", "hs-1")
    tokens["emptySub"] = enc({"sub": "", "exp": FAR}, hs1, "HS256", "hs-1")
    # Malformed but correctly signed.
    tokens["payloadNotJSON"] = jwt.api_jws.encode(b"not json", hs1, algorithm="HS256", headers={"kid": "hs-1"})
    tokens["payloadArray"] = jwt.api_jws.encode(b'[1,2,3]', hs1, algorithm="HS256", headers={"kid": "hs-1"})
    tokens["critHeader"] = compact({"alg": "HS256", "kid": "hs-1", "crit": ["exp"]},
                                   {"uid": "user-1", "exp": FAR}, hs(hs1))
    tokens["duplicateHeaderMember"] = compact('{"alg":"HS256","kid":"hs-1","kid":"hs-2"}',
                                              {"uid": "user-1", "exp": FAR}, hs(hs1))
    tokens["duplicateClaim"] = compact({"alg": "HS256", "kid": "hs-1"},
                                       '{"uid":"user-1","uid":"root","exp":4102444800}', hs(hs1))
    tokens["kidNotString"] = compact('{"alg":"HS256","kid":7}', {"uid": "user-1", "exp": FAR}, hs(hs1))
    tokens["tooLong"] = enc({"uid": "user-1", "exp": FAR, "pad": "x" * 6200}, hs1, "HS256", "hs-1")
    assert len(tokens["tooLong"]) > 8192

    # Raw ECDSA signature over a fixed message, for the ECPublicKey tests.
    message = b"ECPublicKey fixture message"
    r, s = decode_dss_signature(es1.sign(message, ec.ECDSA(hashes.SHA256())))
    raw = r.to_bytes(32, "big") + s.to_bytes(32, "big")

    def swift_pem(name, pem):
        body = "".join(f"        {line}\n" if line else "\n" for line in pem.split("\n"))
        return f'    static let {name} = """\n{body}        """\n'

    out = [BEGIN + "\n"]
    out.append(f'    static let hs1Secret = "{hs1_secret}"\n')
    out.append(f'    static let hs2SecretBase64 = "{base64.b64encode(hs2_secret).decode()}"\n')
    for name, pem in [("rs1PEM", rs1_pem), ("rs2PEM", rs2_pem), ("es1PEM", es1_pem), ("es2PEM", es2_pem),
                      ("p384PEM", spki_pem(p384.public_key())), ("secp256k1PEM", spki_pem(k256.public_key()))]:
        out.append(swift_pem(name, pem))
    out.append(f'    static let ecMessage = "{message.decode()}"\n')
    out.append(f'    static let ecRawSignatureB64URL = "{b64u(raw)}"\n')
    for name, token in tokens.items():
        out.append(f'    static let {name} = "{token}"\n')
    out.append(END)
    block = "".join(out)

    with open(TEST_FILE) as f:
        text = f.read()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        sys.exit(f"markers not found in {TEST_FILE}")
    with open(TEST_FILE, "w") as f:
        f.write(pattern.sub(lambda _: block, text, count=1))
    print(f"wrote {len(tokens)} tokens to {TEST_FILE}")


if __name__ == "__main__":
    main()
