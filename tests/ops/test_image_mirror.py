"""scripts/image takes its Debian mirror from the machine's apt sources (`scripts/image --print-mirror`, which reads
them and prints the mirrors without building anything): the first enabled `deb` source of the host's suite with
the component main, in apt's order (sources.list, then sources.list.d/*.list and deb822 *.sources sorted), the
security mirror likewise; DEBIAN_MIRROR overrides; none found is a clear error."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "image")

DEB822 = """\
Types: deb
# http://snapshot.example.org/archive/debian/20250520T000000Z
URIs: http://mirror.example.org/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.example.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def print_mirror(tmp_path, files: dict[str, str], codename: str = "bookworm", **env: str) -> subprocess.CompletedProcess:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (apt / name).write_text(text)
    (tmp_path / "os-release").write_text(f'PRETTY_NAME="Debian GNU/Linux"\nID=debian\nVERSION_CODENAME={codename}\n')
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DEBIAN_")}
    environment.update(IMAGE_APT_DIR=str(apt), IMAGE_OS_RELEASE=str(tmp_path / "os-release"), **env)
    return subprocess.run([SCRIPT, "--print-mirror"], capture_output=True, text=True, timeout=30, env=environment)


def mirrors(result: subprocess.CompletedProcess) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


def test_deb822_sources(tmp_path):
    out = mirrors(print_mirror(tmp_path, {"sources.list.d/debian.sources": DEB822}))
    assert out == {"DEBIAN_MIRROR": "http://mirror.example.org/debian",
                   "DEBIAN_SECURITY_MIRROR": "http://security.example.org/debian-security"}


def test_one_line_sources_list_comes_first(tmp_path):
    out = mirrors(print_mirror(tmp_path, {
        "sources.list": "# a comment\n"
                        "deb-src http://src.example.org/debian bookworm main\n"
                        "deb http://contrib-only.example.org/debian bookworm contrib\n"
                        "deb [ arch=amd64 signed-by=/usr/share/keyrings/k.gpg ] http://one.example.org/debian bookworm main contrib\n"
                        "deb [arch=amd64] http://one.example.org/debian-security bookworm-security main\n",
        "sources.list.d/debian.sources": DEB822,
    }))
    assert out == {"DEBIAN_MIRROR": "http://one.example.org/debian",
                   "DEBIAN_SECURITY_MIRROR": "http://one.example.org/debian-security"}


def test_apt_order_and_ignored_entries(tmp_path):
    out = mirrors(print_mirror(tmp_path, {
        # apt reads neither other extensions nor disabled stanzas; other suites and non-Debian sources do not count.
        "sources.list.d/00-off.list.disabled-by-farm": "deb http://disabled.example.org/debian bookworm main\n",
        "sources.list.d/10-node.sources": "Types: deb\nURIs: https://node.example.org/node_20.x\nSuites: nodistro\nComponents: main\n",
        "sources.list.d/20-off.sources": "Types: deb\nURIs: http://off.example.org/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n",
        "sources.list.d/30-trixie.list": "deb http://trixie.example.org/debian trixie main\n",
        "sources.list.d/40-debian.sources": DEB822,
        "sources.list.d/50-later.list": "deb http://later.example.org/debian bookworm main\n",
    }))
    assert out["DEBIAN_MIRROR"] == "http://mirror.example.org/debian"


def test_the_hosts_suite(tmp_path):
    out = mirrors(print_mirror(tmp_path, {
        "sources.list.d/debian.sources": DEB822 + "\nTypes: deb\nURIs: http://trixie.example.org/debian\nSuites: trixie\nComponents: main\n",
    }, codename="trixie"))
    # No trixie-security source: the security mirror is next to the main one.
    assert out == {"DEBIAN_MIRROR": "http://trixie.example.org/debian",
                   "DEBIAN_SECURITY_MIRROR": "http://trixie.example.org/debian-security"}


def test_debian_mirror_overrides(tmp_path):
    out = mirrors(print_mirror(tmp_path, {"sources.list.d/debian.sources": DEB822},
                               DEBIAN_MIRROR="http://local.example.org/debian/"))
    assert out == {"DEBIAN_MIRROR": "http://local.example.org/debian",
                   "DEBIAN_SECURITY_MIRROR": "http://local.example.org/debian-security"}


@pytest.mark.parametrize("files", [{}, {"sources.list.d/10-node.sources": "Types: deb\nURIs: https://node.example.org/x\nSuites: nodistro\nComponents: main\n"}])
def test_no_mirror_is_a_clear_error(tmp_path, files):
    r = print_mirror(tmp_path, files)
    assert r.returncode != 0 and r.stdout == ""
    assert "no Debian mirror" in r.stderr and "suite bookworm" in r.stderr and "set DEBIAN_MIRROR" in r.stderr, r.stderr


def test_this_machine_has_a_mirror_and_the_script_names_no_host():
    r = subprocess.run([SCRIPT, "--print-mirror"], capture_output=True, text=True, timeout=30,
                       env={k: v for k, v in os.environ.items() if not k.startswith("DEBIAN_")})
    out = mirrors(r)
    assert out["DEBIAN_MIRROR"].startswith(("http://", "https://", "file://")), out
    with open(SCRIPT, encoding="utf-8") as f:
        script = f.read()
    assert "debian.org" not in script, "the mirror comes from the machine's apt sources, not from the script"
