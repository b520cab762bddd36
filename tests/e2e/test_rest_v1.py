"""REST API v1 (seed 000, SPEC §5): PUT/DELETE /base/{app}/.wakeup/{path...}?id=&mode=."""

from __future__ import annotations

import pytest
import requests

from gateway import wakeup_url
from harness import APP, DISABLED_APP


def assert_error(r: requests.Response, http_status: int, status: str | None = None) -> dict:
    """A JSON error {"status": "<code>", "message": "<text>"} with the given HTTP status."""
    assert r.status_code == http_status, f"{r.request.method} {r.url}: expected {http_status}, got " \
                                         f"{r.status_code} {r.text!r}"
    try:
        doc = r.json()
    except ValueError:
        raise AssertionError(f"error body is not JSON: {r.text!r}") from None
    assert isinstance(doc, dict), doc
    assert isinstance(doc.get("status"), str) and doc["status"], f"no status code in {doc}"
    assert isinstance(doc.get("message"), str) and doc["message"], f"no message in {doc}"
    if status is not None:
        assert doc["status"] == status, f"expected status {status!r}, got {doc}"
    return doc


@pytest.mark.parametrize("mode", [None, "noData", "value", "childEvent"])
def test_subscribe_then_unsubscribe_is_204(stack, uniq, token_factory, mode):
    gw, token = stack.gateway, token_factory()
    r = gw.subscribe(APP, f"{uniq}/some/path", token, mode)
    assert r.status_code == 204, f"PUT: {r.status_code} {r.text!r}"
    assert r.content == b""
    r = gw.subscribe(APP, f"{uniq}/some/path", token, mode)  # same request again refreshes
    assert r.status_code == 204, f"PUT again (refresh): {r.status_code} {r.text!r}"
    r = gw.unsubscribe(APP, f"{uniq}/some/path", token)
    assert r.status_code == 204, f"DELETE: {r.status_code} {r.text!r}"
    assert r.content == b""


def test_unknown_app_is_404_namespace_does_not_exist(stack, uniq, token_factory):
    r = stack.gateway.subscribe("no-such-app-" + uniq[1:], f"{uniq}/a", token_factory())
    assert_error(r, 404, "namespace_does_not_exist")
    r = stack.gateway.unsubscribe("no-such-app-" + uniq[1:], f"{uniq}/a", token_factory())
    assert_error(r, 404, "namespace_does_not_exist")


def test_disabled_app_is_403_disabled(stack, uniq, token_factory):
    r = stack.gateway.subscribe(DISABLED_APP, f"{uniq}/a", token_factory(), "value")
    assert_error(r, 403, "disabled")


def test_missing_id_is_400(stack, uniq):
    assert_error(stack.gateway.subscribe(APP, f"{uniq}/a", None, "value"), 400)
    assert_error(stack.gateway.unsubscribe(APP, f"{uniq}/a", None), 400)


@pytest.mark.parametrize("mode", ["bogus", "VALUE", "child_event"])
def test_unknown_mode_is_400(stack, uniq, token_factory, mode):
    assert_error(stack.gateway.subscribe(APP, f"{uniq}/a", token_factory(), mode), 400)


@pytest.mark.parametrize("bad_key", ["b.c", ".b", "b.", "b$c", "b#c", "b[c", "b]c", "$", "a\x01b", "a\nb"])
def test_forbidden_characters_in_a_key_are_400(stack, uniq, token_factory, bad_key):
    token = token_factory()
    assert_error(stack.gateway.subscribe(APP, f"{uniq}/{bad_key}/x", token, "noData"), 400)
    assert_error(stack.gateway.unsubscribe(APP, f"{uniq}/{bad_key}/x", token), 400)


@pytest.mark.parametrize("path_template", ["{u}//b", "//{u}/b", "{u}/a//"])
def test_empty_keys_are_400(stack, uniq, token_factory, path_template):
    path = path_template.format(u=uniq)
    url = wakeup_url(stack.gateway.base, APP, path, id=token_factory(), mode="noData")
    assert "//" in url.split("/.wakeup", 1)[1], url  # the client must not normalise it away
    r = stack.gateway.session.put(url, timeout=10)
    assert_error(r, 400)


def test_single_trailing_slash_is_normalised_away(stack, uniq, token_factory):
    r = stack.gateway.subscribe(APP, f"{uniq}/a/b/", token_factory(), "noData")
    assert r.status_code == 204, f"{r.status_code} {r.text!r}"


def test_root_path_forms_are_accepted(stack, token_factory):
    token = token_factory()
    gw = stack.gateway
    for url in (f"{gw.base}/base/{APP}/.wakeup?id={token}", f"{gw.base}/base/{APP}/.wakeup/?id={token}"):
        r = gw.session.put(url, timeout=10)
        assert r.status_code == 204, f"PUT {url}: {r.status_code} {r.text!r}"
        r = gw.session.delete(url, timeout=10)
        assert r.status_code == 204, f"DELETE {url}: {r.status_code} {r.text!r}"


def _path_of_bytes(uniq: str, total: int, unit: str = "a") -> str:
    """A normalised path (leading "/") of exactly ``total`` UTF-8 bytes: uniq + "/" + filler."""
    head = uniq + "/"
    room = total - len(head.encode())
    unit_len = len(unit.encode())
    filler = unit * (room // unit_len) + "a" * (room % unit_len)
    path = head + filler
    assert len(path.encode()) == total
    return path


def test_path_of_2048_bytes_is_accepted(stack, uniq, token_factory):
    token = token_factory()
    for unit in ("a", "é"):
        path = _path_of_bytes(uniq, 2048, unit)
        r = stack.gateway.subscribe(APP, path, token, "noData")
        assert r.status_code == 204, f"{len(path.encode())}-byte path ({unit!r}): {r.status_code} {r.text!r}"
        stack.gateway.unsubscribe(APP, path, token)


@pytest.mark.parametrize("unit", ["a", "é"])
def test_path_over_2048_bytes_is_400(stack, uniq, token_factory, unit):
    path = _path_of_bytes(uniq, 2049, unit)
    # With "é" the path is far under 2048 characters: the limit is in UTF-8 bytes.
    assert_error(stack.gateway.subscribe(APP, path, token_factory(), "noData"), 400)


def test_openapi_document_is_served(stack):
    r = stack.gateway.get("/openapi.json")
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]!r}"
    doc = r.json()
    assert "openapi" in doc and "paths" in doc
    assert any(".wakeup" in p for p in doc["paths"]), sorted(doc["paths"])
