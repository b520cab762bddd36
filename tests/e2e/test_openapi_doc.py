"""The OpenAPI document (docs/openapi.json) is valid, complete, and is what the gateway serves.

No gateway needed: the served document is the file Sources/GatewayAPI/Resources/openapi.json, embedded in the
binary by the package manager (docs/openapi.json links to it); test_api_fuzz.py checks what a binary serves.
"""

from __future__ import annotations

import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "openapi.json")
SERVED = os.path.join(ROOT, "Sources", "GatewayAPI", "Resources", "openapi.json")
ROUTES = os.path.join(ROOT, "Sources", "GatewayAPI", "Routes.swift")

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


def _read(path: str) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _doc() -> dict:
    return json.loads(_read(DOC))


def test_docs_link_to_the_served_file():
    """docs/openapi.json is the file the package manager embeds in the binary (a link to it, not a copy)."""
    assert os.path.islink(DOC), "docs/openapi.json must be a link to Sources/GatewayAPI/Resources/openapi.json"
    assert os.path.realpath(DOC) == os.path.realpath(SERVED)
    doc_text = _read(DOC)
    assert doc_text.endswith("\n") and not doc_text.endswith("\n\n"), "docs/openapi.json must end with one newline"


def test_document_validates_as_openapi_3_0():
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation import OpenAPIV30SpecValidator

    doc = _doc()
    assert doc["openapi"].startswith("3.0.")
    validate(doc, cls=OpenAPIV30SpecValidator)


def _resolve(doc: dict, node: dict) -> dict:
    while "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        node = doc
        for part in ref[2:].split("/"):
            node = node[part]
    return node


def _operations(doc: dict):
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def test_every_route_of_routes_swift_is_documented():
    """Routes registered in Routes.swift (router.get("/x"), and the wake-up patterns) are in the document."""
    src = _read(ROUTES)
    doc = _doc()
    documented = {(m, p) for p, m, _ in _operations(doc)}
    for method, path in re.findall(r'router\.(get|put|post|delete|patch)\("([^"]+)"\)', src):
        assert (method, path) in documented, f"{method.upper()} {path} is served but not documented"
    m = re.search(r'for pattern in \[([^\]]*)\]', src)
    assert m, "wake-up route patterns not found in Routes.swift"
    patterns = re.findall(r'"([^"]+)"', m.group(1))
    registered = set(re.findall(r'router\.(put|delete|get|post)\(RouterPath\(pattern\)', src))
    assert registered == {"put", "delete"}, registered
    for pattern in patterns:
        # Hummingbird ":app" is {app}; "**" (catch-all) is the multi-segment {path}.
        openapi_path = re.sub(r":(\w+)", r"{\1}", pattern).replace("/**", "/{path}")
        for method in registered:
            assert (method, openapi_path) in documented, f"{method.upper()} {openapi_path} is not documented"


def test_wakeup_operations_parameters_and_responses():
    doc = _doc()
    for path in ("/base/{app}/.wakeup", "/base/{app}/.wakeup/{path}"):
        item = doc["paths"][path]
        path_params = {_resolve(doc, p)["name"] for p in item.get("parameters", [])}
        assert path_params == ({"app", "path"} if "{path}" in path else {"app"})
        for method in ("put", "delete"):
            op = item[method]
            params = {_resolve(doc, p)["name"]: _resolve(doc, p) for p in op["parameters"]}
            assert params["id"]["in"] == "query" and params["id"]["required"] is True
            assert params["token"]["in"] == "query" and not params["token"].get("required", False)
            if method == "put":
                mode = params["mode"]["schema"]
                assert {"noData", "value", "childEvent"} <= set(mode["enum"]) and mode["default"] == "noData"
            else:
                assert "mode" not in params
            # 429: quotas and write rates; 507: the replica's state mark, for creates only (issue 17).
            # 502 and 504: only from a replica that forwarded the call to the owner (issue 17).
            assert set(op["responses"]) == {"204", "400", "401", "403", "404", "429", "502", "503", "504"} | (
                {"507"} if method == "put" else set())
            codes = {}
            for status in ("400", "403", "404"):
                schema = _resolve(doc, op["responses"][status])["content"]["application/json"]["schema"]
                assert {"$ref": "#/components/schemas/Error"} in schema["allOf"]
                codes[status] = set(schema["allOf"][1]["properties"]["status"]["enum"])
            assert codes == {
                "400": {"bad_request"},
                "403": {"disabled", "permission_denied", "too_big"},
                "404": {"namespace_does_not_exist"},
            }
            limited = _resolve(doc, op["responses"]["429"])
            assert "Retry-After" in limited["headers"]
            assert limited["content"]["application/json"]["schema"]["allOf"][1]["properties"]["status"]["enum"] == [
                "quota_exceeded"]
    multi = _resolve(doc, doc["paths"]["/base/{app}/.wakeup/{path}"]["parameters"][1])
    assert "multi-segment" in multi["description"] and "%2F" in multi["description"]


def test_error_schema_and_operations_endpoints():
    doc = _doc()
    error = doc["components"]["schemas"]["Error"]
    assert error["required"] == ["status", "message"]
    assert error["properties"]["status"]["type"] == "string" and error["properties"]["message"]["type"] == "string"
    paths = doc["paths"]
    assert set(paths) == {"/base/{app}/.wakeup", "/base/{app}/.wakeup/{path}", "/datasync/v2/{app}/subscriptions/{uid}",
                          "/datasync/v2/{app}/subscriptions/{uid}/{id}",
                          "/datasync/v2/{app}/subscriptions/{uid}/.replace-context", "/healthz", "/readyz", "/metrics",
                          "/openapi.json", "/admin/apps", "/admin/apps/{app}"}
    assert paths["/healthz"]["get"]["responses"]["200"]["content"]["application/json"]["example"] == {"status": "ok"}
    readyz = paths["/readyz"]["get"]["responses"]
    assert readyz["200"]["content"]["application/json"]["example"] == {"status": "ready"}
    assert readyz["503"]["content"]["application/json"]["schema"]["allOf"][1]["properties"]["status"]["enum"] == [
        "not_ready"]
    assert "text/plain" in paths["/metrics"]["get"]["responses"]["200"]["content"]
    assert "application/json" in paths["/openapi.json"]["get"]["responses"]["200"]["content"]
    ids = [op["operationId"] for _, _, op in _operations(doc)]
    assert len(ids) == len(set(ids)), "operationId must be unique"


@pytest.mark.parametrize("value,ok", [
    ("chat", True), ("chat/rooms/42", True), ("chat/", True), ("ünï cödé/ key", True),
    ("a//b", False), ("a.b", False), ("a$", False), ("#x", False), ("[x", False), ("x]", False), ("a\x01", False),
    ("a\x7f", False), ("/a", False), ("", False),
])
def test_data_path_pattern_matches_the_gateway_rules(value, ok):
    """The documented pattern accepts exactly the keys DataPath accepts (docs: SPEC §3)."""
    doc = _doc()
    schema = doc["components"]["parameters"]["DataPath"]["schema"]
    matched = re.search(schema["pattern"], value) is not None and len(value) >= schema["minLength"]
    assert matched is ok
