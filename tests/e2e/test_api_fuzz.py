"""Property-based fuzzing of the REST API with schemathesis, against a running gateway's own `/openapi.json`.

Stateless: for every documented operation schemathesis generates valid and invalid requests (path, query) and
checks each answer: never a 5xx, a documented status code, a documented content type, a body matching the
documented schema (errors are `{"status", "message"}`), valid data accepted and invalid data refused.

Stateful: sequences of calls that follow the document's OpenAPI links (create → get, update, delete, list;
list → get; delete → get; v1 subscribe → unsubscribe), with the demo app's token for user `demo-user`, so
that the ids come from earlier answers. Besides the checks above, schemathesis' stateful checks hold: a
resource just created can be read, one just deleted is gone (404).

Bounded: a fixed number of examples per operation (FUZZ_MAX_EXAMPLES, default 40) and of scenarios
(FUZZ_STATEFUL_SCENARIOS, default 40, up to 8 steps each), no shrinking, no example database, deterministic;
the whole file takes well under 2 minutes. The gateway runs with embedded defaults (in-process broker, console
sink; one app, `demo`).
"""

from __future__ import annotations

import os
import time

import hypothesis
import jwt
import pytest
import requests
import schemathesis
from schemathesis.config import SchemathesisConfig

from _gateway_embedded import EmbeddedGateway

MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "40"))
STATEFUL_SCENARIOS = int(os.environ.get("FUZZ_STATEFUL_SCENARIOS", "40"))
# The embedded defaults' demo app and its built-in HS256 secret (AppSettings.demoSecret).
DEMO_SECRET = "demo-secret-for-the-embedded-defaults-only"
DEMO_USER = "demo-user"

# The whole file (gateway start, ~1,300 requests, stop) takes about a minute; the limit catches a hang.
pytestmark = [pytest.mark.gateway, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def embedded_gateway(tmp_path_factory):
    # With an admin token, so that the admin endpoints answer 401 without a bearer as documented (without a configured
    # token they answer 403 `disabled` to every call: test_admin.py).
    gw = EmbeddedGateway(str(tmp_path_factory.mktemp("fuzz")), env={"PUSH_ADMIN_TOKEN": "fuzz-admin-token-0123456789abcdef"})
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


def _config(base_url: str) -> SchemathesisConfig:
    return SchemathesisConfig.from_dict({
        "base-url": base_url,
        "request-timeout": 10,
        "generation": {
            "mode": "all",  # positive and negative data
            "max-examples": MAX_EXAMPLES,
            "no-shrink": True,
            "deterministic": True,
            "database": "none",
        },
        "checks": {"enabled": True},
    })


@pytest.fixture(scope="module")
def api_schema(embedded_gateway):
    served = requests.get(embedded_gateway.base_url + "/openapi.json", timeout=10)
    assert served.status_code == 200, served.text[:500]
    assert "/base/{app}/.wakeup/{path}" in served.json().get("paths", {}), (
        "the gateway serves a document without the wake-up API (stale build?): nothing to fuzz")
    return schemathesis.openapi.from_url(embedded_gateway.base_url + "/openapi.json",
                                         config=_config(embedded_gateway.base_url))


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
def test_api_conforms_to_its_openapi_document(case, embedded_gateway):
    case.call_and_validate()
    assert embedded_gateway.alive(), "the gateway died during fuzzing\n" + embedded_gateway.tails()


def demo_token() -> str:
    return jwt.encode({"uid": DEMO_USER, "exp": int(time.time()) + 3600}, DEMO_SECRET, algorithm="HS256",
                      headers={"kid": "demo"})


def test_api_stateful_sequences_follow_the_links(embedded_gateway):
    base = embedded_gateway.base_url
    config = SchemathesisConfig.from_dict({
        "base-url": base,
        "request-timeout": 10,
        "generation": {"mode": "positive", "no-shrink": True, "deterministic": True, "database": "none"},
        "checks": {"enabled": True},
        # Two documented 400s for schema-valid bodies, which a schema cannot express: an expiry in the past
        # (other than 0), and in a PUT a kind, path or context that is not the tuple of the id (the id is a
        # function of them).
        "operations": [{
            "include-operation-id": ["createSubscriptionV2", "updateSubscriptionV2"],
            "checks": {"positive_data_acceptance": {
                "expected-statuses": ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]}},
        }],
    })
    schema = schemathesis.openapi.from_url(base + "/openapi.json", config=config)
    calls: list[tuple[str, int]] = []

    token = demo_token()

    class Machine(schema.as_state_machine()):
        def before_call(self, case):
            # Every call as the demo app's user, so that created subscriptions can be read, updated and deleted.
            super().before_call(case)
            if case.path_parameters is not None and "app" in case.path_parameters:
                case.path_parameters["app"] = "demo"
            if case.path_parameters is not None and "uid" in case.path_parameters:
                case.path_parameters["uid"] = DEMO_USER
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}

        def teardown(self):
            # Each scenario starts from no subscription of the user, so that a scenario replayed by Hypothesis
            # (to report a failure) sees the answers it saw the first time.
            user = f"{base}/datasync/v2/demo/subscriptions/{DEMO_USER}"
            auth = {"Authorization": f"Bearer {token}"}
            listed = requests.get(user, headers=auth, timeout=10)
            assert listed.status_code == 200, listed.text
            for subscription in listed.json()["subscriptions"]:
                gone = requests.delete(f"{user}/{subscription['id']}", headers=auth, timeout=10)
                assert gone.status_code == 204, gone.text
            super().teardown()

        def after_call(self, response, case):
            super().after_call(response, case)
            calls.append((f"{case.method.upper()} {case.path}", response.status_code))

        def validate_response(self, response, case, *args, **kwargs):
            super().validate_response(response, case, *args, **kwargs)
            assert embedded_gateway.alive(), "the gateway died during stateful fuzzing\n" + embedded_gateway.tails()

    Machine.run(settings=hypothesis.settings(
        max_examples=STATEFUL_SCENARIOS, stateful_step_count=8, deadline=None, derandomize=True, database=None,
        phases=[hypothesis.Phase.generate], suppress_health_check=list(hypothesis.HealthCheck)))

    # The links were followed: subscriptions were created, then read, updated and deleted by the id the
    # creation returned (not only refused with made-up ids).
    one = "/datasync/v2/{app}/subscriptions/{uid}/{id}"
    assert ("POST /datasync/v2/{app}/subscriptions/{uid}", 201) in calls, calls
    for method, status in (("GET", 200), ("PUT", 200), ("DELETE", 204)):
        assert (f"{method} {one}", status) in calls, f"no {method} {one} answered {status}: {sorted(set(calls))}"


def test_served_document_is_docs_openapi_json(embedded_gateway):
    """The binary under test serves docs/openapi.json (a stale build would fuzz a stale document)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "docs", "openapi.json"), encoding="utf-8") as f:
        expected = f.read()
    r = requests.get(embedded_gateway.base_url + "/openapi.json", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.text == expected, "the gateway binary serves another document: rebuild it"


def test_gateway_stops_cleanly_on_sigterm(tmp_path):
    gw = EmbeddedGateway(str(tmp_path)).start()
    t0 = time.monotonic()
    code = gw.stop()
    assert code == 0, f"exit code {code} after SIGTERM\n{gw.tails()}"
    assert time.monotonic() - t0 < 10, "graceful shutdown took longer than 10 s"
