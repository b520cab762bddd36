"""Issue 10, findings 5, 6 and 8, against the real binary: tokens bound to an issuer and audience, `uid` claims
that are not user ids, short HS256 secrets; parse errors that never print the file's text (a secret may be on
the offending line); cleartext provider endpoints refused unless `allowInsecureEndpoints` is set.

Tokens are made by PyJWT, an independent JWT implementation.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
import warnings

import jwt
import pytest
import requests
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway import gateway_binary, gateway_env
from harness import FakeFCM, Stack
from procutil import wait_for

SECRET = "settings-security-hs256-secret-long-enough"
ISSUER = "https://securetoken.google.com/Kate-project"
AUDIENCE = "Kate-project"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_PEM = RSA_KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def hs(secret: str = SECRET, exp_in: int = 600, **claims) -> str:
    return jwt.encode({"exp": int(time.time()) + exp_in, **claims}, secret, algorithm="HS256")


def rs(**claims) -> str:
    return jwt.encode({"exp": int(time.time()) + 600, **claims}, RSA_KEY, algorithm="RS256", headers={"kid": "r1"})


def bound(uid: str = "alice", **claims) -> dict:
    """Claims of a token for ``uid`` with the app's issuer and audience (overridable)."""
    return {"uid": uid, "iss": ISSUER, "aud": AUDIENCE, **claims}


def v2_url(stack, app: str, uid: str) -> str:
    return f"{stack.gateway.base}/datasync/v2/{app}/subscriptions/{uid}"


def v2_get(stack, app: str, uid: str, token: str) -> int:
    return requests.get(v2_url(stack, app, uid), headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code


def logs_when(stack, needle: str, what: str) -> str:
    """The gateway's log once ``needle`` is in it."""
    return wait_for(lambda: (lambda text: text if needle in text else None)(stack.gateway.logs()), timeout=20,
                    what=what, on_timeout=stack.gateway.tails)


def refusal_line(stack, app: str, count: int = 1) -> str:
    def lines():
        found = [l for l in stack.gateway.logs().splitlines() if "app settings refused" in l and app in l]
        return found if len(found) >= count else None
    return wait_for(lines, timeout=20, what=f"refusal #{count} of {app}'s settings", on_timeout=stack.gateway.tails)[
        count - 1]


@pytest.mark.timeout(180)
def test_issuer_audience_and_uid_claim_enforced(stack_factory, uniq, token_factory):
    stack = stack_factory()
    app = "issaud" + uniq[4:]
    stack.write_app_settings(app, {
        "authKeys": [{"alg": "HS256", "secret": SECRET}, {"alg": "RS256", "kid": "r1", "publicKeyPEM": RSA_PEM}],
        "issuer": ISSUER, "audience": AUDIENCE,
    })
    wait_for(lambda: v2_get(stack, app, "alice", hs(**bound())) == 200, timeout=20, what="the app to be served",
             on_timeout=stack.gateway.tails)

    # Accepted: the exact issuer, the audience as a string or in a list; RS256 with sub.
    body = {"kind": "mobile", "mode": "value", "path": f"{uniq}/a", "context": token_factory()}
    r = requests.post(v2_url(stack, app, "alice"), json=body, timeout=10,
                      headers={"Authorization": f"Bearer {hs(**bound(aud=['other', AUDIENCE]))}"})
    assert r.status_code == 201, r.text
    assert v2_get(stack, app, "bob", rs(sub="bob", iss=ISSUER, aud=[AUDIENCE])) == 200

    # Refused (401): another issuer or audience, none, a number, a canonically equivalent spelling
    # (KELVIN SIGN for K, which Swift's String equality would call equal).
    kelvin = "\u212a"
    refused = {
        "other issuer": bound(iss=ISSUER + "-2"),
        "other audience": bound(aud="other-project"),
        "audience list without it": bound(aud=["other-project", "third"]),
        "no iss": {"uid": "alice", "aud": AUDIENCE},
        "no aud": {"uid": "alice", "iss": ISSUER},
        "aud a number": bound(aud=7),
        "issuer with a Kelvin sign": bound(iss=ISSUER.replace("K", kelvin)),
        "audience with a Kelvin sign": bound(aud=AUDIENCE.replace("K", kelvin)),
    }
    for what, claims in refused.items():
        r = requests.get(v2_url(stack, app, "alice"), headers={"Authorization": f"Bearer {hs(**claims)}"}, timeout=10)
        assert r.status_code == 401 and r.json()["status"] == "unauthorized", f"{what}: {r.status_code} {r.text}"
    assert v2_get(stack, app, "bob", rs(sub="bob")) == 401, "RS256 token without iss/aud"
    # The v1 API verifies its `token` parameter with the same verifier.
    assert stack.gateway.subscribe(app, f"{uniq}/v1", token_factory(), token=hs(**bound(aud="x"))).status_code == 401
    assert stack.gateway.subscribe(app, f"{uniq}/v1", token_factory(), token=hs(**bound())).status_code == 204

    # A uid claim that is not a non-empty string is refused, never replaced by sub (on ac75e55 these were alice).
    for uid in (42, "", None, ["alice"]):
        claims = dict(bound(), uid=uid, sub="alice")
        assert v2_get(stack, app, "alice", hs(**claims)) == 401, f"uid={uid!r}"
    # Without a uid claim, sub is the user.
    no_uid = {k: v for k, v in bound().items() if k != "uid"}
    assert v2_get(stack, app, "alice", hs(sub="alice", **no_uid)) == 200


@pytest.mark.timeout(180)
def test_unbound_asymmetric_keys_warned_and_short_secrets_refused(stack_factory, uniq):
    stack = stack_factory()
    rs_only, issuer_only, hs_only = "warnrs" + uniq[4:], "warniss" + uniq[4:], "hsonly" + uniq[4:]
    stack.write_app_settings(rs_only, {"authKeys": [{"alg": "RS256", "kid": "r1", "publicKeyPEM": RSA_PEM}]})
    stack.write_app_settings(issuer_only, {"authKeys": [{"alg": "RS256", "publicKeyPEM": RSA_PEM}], "issuer": ISSUER})
    stack.write_app_settings(hs_only, {"authKeys": [{"alg": "HS256", "secret": SECRET}]})
    wait_for(lambda: v2_get(stack, hs_only, "alice", hs(uid="alice")) == 200, timeout=20, what="the HS256 app",
             on_timeout=stack.gateway.tails)
    warning = "app accepts RS256/ES256 tokens without checking"
    logs_when(stack, rs_only, "the RS256 app's load")
    lines = wait_for(lambda: (lambda found: found if len(found) >= 2 else None)(
        [l for l in stack.gateway.logs().splitlines() if warning in l]), timeout=20, what="two warnings")
    by_app = {app: [l for l in lines if app in l] for app in (rs_only, issuer_only, hs_only)}
    assert len(by_app[rs_only]) == 1 and "issuer and audience" in by_app[rs_only][0], lines
    assert len(by_app[issuer_only]) == 1 and "checking audience" in by_app[issuer_only][0], lines
    assert by_app[hs_only] == [], "an app with HS256 keys only is not warned about"

    # A 31-byte HS256 secret is refused; the app keeps its last good settings.
    short = "short-" + uuid.uuid4().hex[:25]
    assert len(short.encode()) == 31
    stack.write_app_settings(hs_only, {"authKeys": [{"alg": "HS256", "secret": short}]})
    line = refusal_line(stack, hs_only)
    assert "authKeys[0]" in line and "shorter than 32 bytes" in line, line
    assert v2_get(stack, hs_only, "alice", hs(uid="alice")) == 200, "the last good key still verifies"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyJWT warns about the short key too
        assert v2_get(stack, hs_only, "alice", hs(short, uid="alice")) == 401
    assert short not in stack.gateway.logs()


@pytest.mark.timeout(120)
def test_broken_settings_files_never_log_their_text(stack_factory, uniq):
    stack = stack_factory()
    app, json_app = "broken" + uniq[4:], "brokenjson" + uniq[4:]
    good = {"authKeys": [{"alg": "HS256", "secret": SECRET}]}
    stack.write_app_settings(app, good)
    wait_for(lambda: v2_get(stack, app, "alice", hs(uid="alice")) == 200, timeout=20, what="the app to be served",
             on_timeout=stack.gateway.tails)

    secret = "pgsecret-" + uuid.uuid4().hex
    # Line 5, column 37: a second ':' in a plain scalar ("mapping values are not allowed in this context").
    broken = ("enabled: true\n"
              "hms:\n"
              "  appId: \"100000001\"\n"
              "  clientId: \"100000001\"\n"
              f"  clientSecret: {secret}: oops\n")
    path = stack.write_app_settings(app, None, raw=broken)
    line = refusal_line(stack, app)
    assert f"{path}:5:" in line and "not valid YAML/JSON" in line, line
    # The same in JSON (a settings file may be .json).
    json_path = os.path.join(stack.settings_dir, f"{json_app}.json")
    with open(json_path, "w", encoding="utf-8") as f:
        f.write('{"hms": {"appId": "1", "clientId": "2",\n  "clientSecret": "' + secret + '" "x"}}\n')
    json_line = refusal_line(stack, json_app)
    assert f"{json_path}:2:" in json_line, json_line
    # A wrong type names the field.
    stack.write_app_settings(app, None, raw=f"hms:\n  clientSecret: [{secret}]\n")
    type_line = refusal_line(stack, app, count=2)
    assert "hms.clientSecret" in type_line and "wrong type" in type_line, type_line

    assert secret not in stack.gateway.logs(), "a secret from a broken settings file reached the log"
    assert v2_get(stack, app, "alice", hs(uid="alice")) == 200, "the last good settings stay in force"


def run_until_exit(tmp_path, config_text: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    path = tmp_path / f"config-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(config_text, encoding="utf-8")
    out = subprocess.run([gateway_binary(), "run", "--config", str(path)], capture_output=True, text=True,
                         timeout=timeout, env=gateway_env(env), cwd=str(tmp_path))
    out.config_path = str(path)
    return out


@pytest.mark.timeout(60)
def test_broken_main_configuration_never_prints_its_text(tmp_path):
    secret = "pgsecret-" + uuid.uuid4().hex
    text = ("http: {port: 0}\n"
            "apps:\n"
            "  toto:\n"
            "    hms:\n"
            "      appId: \"1\"\n"
            "      clientId: \"2\"\n"
            f"      clientSecret: {secret}: oops\n")
    out = run_until_exit(tmp_path, text)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert f"{out.config_path}:7:" in out.stderr and "not valid YAML/JSON" in out.stderr, out.stderr
    assert secret not in out.stderr + out.stdout


@pytest.mark.timeout(60)
def test_cleartext_provider_endpoints_refused_without_the_setting(tmp_path):
    cases = {
        "fcm.baseURL": "fcm: {baseURL: 'http://127.0.0.1:9'}\n",
        "fcm.tokenURL": "fcm: {tokenURL: 'http://127.0.0.1:9/token'}\n",
        "hms.baseURL": "hms: {baseURL: 'HTTP://127.0.0.1:9'}\n",
        "hms.tokenURL": "hms: {tokenURL: 'http://127.0.0.1:9/oauth2/v3/token'}\n",
    }
    for name, text in cases.items():
        out = run_until_exit(tmp_path, "http: {port: 0}\n" + text)
        assert out.returncode == 2, (name, out.returncode, out.stderr)
        assert f"{name} is a cleartext http:// URL" in out.stderr and "allowInsecureEndpoints" in out.stderr, out.stderr
    # From the environment too.
    out = run_until_exit(tmp_path, "http: {port: 0}\n", env={"PUSH_FCM_TOKEN_URL": "http://127.0.0.1:9/token"})
    assert out.returncode == 2 and "fcm.tokenURL is a cleartext" in out.stderr, out.stderr
    # Not a URL of either scheme.
    out = run_until_exit(tmp_path, "http: {port: 0}\nfcm: {baseURL: 'ftp://127.0.0.1'}\n")
    assert out.returncode == 2 and "fcm.baseURL must be an https:// URL" in out.stderr, out.stderr


@pytest.mark.timeout(180)
def test_cleartext_fake_fcm_with_allow_insecure_endpoints(workdir, broker, publisher, stack_factory, uniq,
                                                          token_factory):
    # An h2c fake FCM: make_config sets allowInsecureEndpoints for it; the gateway warns and delivers.
    fake_dir = os.path.join(workdir, "h2c-fake-" + uniq[4:])
    os.makedirs(fake_dir)
    fake = FakeFCM(fake_dir, tls=False).start()
    stack = Stack(workdir, broker, publisher, fake, name="h2c-" + uniq[4:])
    try:
        assert fake.base_url.startswith("http://") and stack.config["allowInsecureEndpoints"] is True
        stack.start()
        assert "allowInsecureEndpoints is set" in stack.gateway.logs()
        device = token_factory("h2c")
        stack.gateway.must_subscribe("toto", uniq, device, "noData")
        stack.publish(uniq, "SET", '"x"')
        stack.wait_sends(device, 1)
        assert fake.sends_for(device)[0]["status"] == 200
    finally:
        stack.stop()
        fake.stop()

    # Without it, the same fake's service account (token_uri http://) makes an app's settings refused, while
    # a gateway with TLS endpoints runs.
    plain = stack_factory()
    assert "allowInsecureEndpoints" not in plain.config
    assert "allowInsecureEndpoints is set" not in plain.gateway.logs()
    account = fake.service_account_file("cleartext")
    app = "h2capp" + uniq[4:]
    plain.write_app_settings(app, {"fcmServiceAccountFile": account})
    line = refusal_line(plain, app)
    assert "token_uri is a cleartext http:// URL" in line, line
    # The configuration file of the h2c gateway is refused by a gateway started without the setting.
    config = dict(stack.config)
    del config["allowInsecureEndpoints"]
    config_path = os.path.join(workdir, f"h2c-refused-{uniq[4:]}.yaml")
    with open(config_path, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    out = subprocess.run([gateway_binary(), "run", "--config", config_path], capture_output=True, text=True,
                         timeout=30, env=gateway_env())
    assert out.returncode == 2 and "fcm.baseURL is a cleartext http:// URL" in out.stderr, out.stderr
