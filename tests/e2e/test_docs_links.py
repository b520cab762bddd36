"""The README and docs/ carry the project on their own: every relative link resolves inside the repository, and
none points outside it (a clone has nothing next to it)."""

from __future__ import annotations

import glob
import os
import re

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files() -> list[str]:
    files = [os.path.join(REPO_ROOT, "README.md")]
    files += glob.glob(os.path.join(REPO_ROOT, "docs", "*.md"))
    files += glob.glob(os.path.join(REPO_ROOT, "Benchmarks", "*.md"))
    return sorted(files)


def test_relative_links_resolve_inside_the_repository():
    broken = []
    for path in markdown_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
            inside = resolved == REPO_ROOT or resolved.startswith(REPO_ROOT + os.sep)
            if not inside or not os.path.exists(resolved):
                broken.append(f"{os.path.relpath(path, REPO_ROOT)}: {target}")
    assert not broken, "links that do not resolve inside the repository:\n" + "\n".join(broken)


def test_the_contract_and_the_publishers_guide_are_in_docs():
    for name in ("SPEC.md", "PUBLISHING.md"):
        assert os.path.isfile(os.path.join(REPO_ROOT, "docs", name)), name
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    for needed in ("docs/SPEC.md", "docs/PUBLISHING.md", "scripts/run", "scripts/test", "PUSH_HTTP_PORT",
                   "a restart starts with no subscriptions"):
        assert needed in readme, f"README.md does not mention {needed}"
