"""The alert rules (deploy/prometheus/alerts.yaml): promtool accepts them, their unit tests pass, every alert is
tested firing and not firing, and every alert has a runbook entry in docs/OPERATIONS.md."""

from __future__ import annotations

import os
import re
import subprocess

import yaml

from conftest import ROOT, tool

RULES = os.path.join(ROOT, "deploy", "prometheus", "alerts.yaml")
RULE_TESTS = os.path.join(ROOT, "deploy", "prometheus", "alerts.test.yaml")


def alerts() -> list[dict]:
    with open(RULES, encoding="utf-8") as f:
        return [rule for group in yaml.safe_load(f)["groups"] for rule in group["rules"] if "alert" in rule]


def test_promtool_check_rules():
    r = subprocess.run([tool("promtool"), "check", "rules", RULES], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in r.stdout


def test_promtool_test_rules():
    r = subprocess.run([tool("promtool"), "test", "rules", RULE_TESTS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_every_alert_is_tested_firing_and_not_firing():
    with open(RULE_TESTS, encoding="utf-8") as f:
        cases = [case for test in yaml.safe_load(f)["tests"] for case in test["alert_rule_test"]]
    for alert in alerts():
        name = alert["alert"]
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c.get("exp_alerts") for c in mine), f"{name}: no test where it fires"
        assert any(not c.get("exp_alerts") for c in mine), f"{name}: no test where it stays quiet"


def test_every_alert_has_a_runbook_entry():
    operations = open(os.path.join(ROOT, "docs", "OPERATIONS.md"), encoding="utf-8").read()
    headings = {re.sub(r"[^a-z0-9-]", "", h.strip().lower().replace(" ", "-")) for h in re.findall(r"^#+ (.+)$", operations, re.M)}
    for alert in alerts():
        name = alert["alert"]
        runbook = alert["annotations"]["runbook"]
        assert runbook == f"docs/OPERATIONS.md#{name.lower()}", runbook
        assert name.lower() in headings, f"docs/OPERATIONS.md has no heading {name}"
        section = operations.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        for part in ("**Means**", "**Check**", "**Do**"):
            assert part in section, f"runbook {name}: no {part}"
        assert alert["labels"]["severity"] in ("warning", "critical")
        assert {"summary", "description", "runbook"} <= set(alert["annotations"])
