"""Property-based fuzzing of the REST API with schemathesis, against a running gateway's own `/openapi.json`.

For every documented operation schemathesis generates valid and invalid requests (path, query) and checks each
answer: never a 5xx, a documented status code, a documented content type, a body matching the documented
schema (errors are `{"status", "message"}`), valid data accepted and invalid data refused.

Bounded: a fixed number of examples per operation (FUZZ_MAX_EXAMPLES, default 40), no shrinking, no example
database, deterministic; the whole file takes well under 90 s. The gateway runs with embedded defaults
(in-process broker, console sink; one app, `demo`).
"""

from __future__ import annotations

import os
import time

import pytest
import requests
import schemathesis
from schemathesis.config import SchemathesisConfig

from _gateway_embedded import EmbeddedGateway

MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "40"))

# The whole file (gateway start, ~1,000 requests, stop) takes about 30 s; the limit catches a hang.
pytestmark = [pytest.mark.gateway, pytest.mark.timeout(150)]


@pytest.fixture(scope="module")
def embedded_gateway(tmp_path_factory):
    gw = EmbeddedGateway(str(tmp_path_factory.mktemp("fuzz")))
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


def test_served_document_is_docs_openapi_json(embedded_gateway):
    """The binary under test serves docs/openapi.json (a stale build would fuzz a stale document)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "docs", "openapi.json"), encoding="utf-8") as f:
        expected = f.read().rstrip("\n")
    r = requests.get(embedded_gateway.base_url + "/openapi.json", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.text == expected, "the gateway binary serves another document: rebuild it (scripts/sync-openapi first)"


def test_gateway_stops_cleanly_on_sigterm(tmp_path):
    gw = EmbeddedGateway(str(tmp_path)).start()
    t0 = time.monotonic()
    code = gw.stop()
    assert code == 0, f"exit code {code} after SIGTERM\n{gw.tails()}"
    assert time.monotonic() - t0 < 10, "graceful shutdown took longer than 10 s"
