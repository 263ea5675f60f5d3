"""``keel allow-host HOST[:PORT]``, by effect: the entry lands in keel.toml's network_allow with
every other byte kept, the policy then allows the host; bad input changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _support import keel, make_workspace

_TOML = """\
# keel.toml: reviewed like code
[policy]
preset = "strict"  # the team's choice
network_allow = [
    "pypi.org",  # the index
    "files.pythonhosted.org",
]

# what the task may change
[scope]
include = ["src/**"]
"""


def _url_verdict(ws: Path, url: str) -> str:
    done = keel("policy", "check", "--json", "--url", url, workspace=ws, check=True)
    return json.loads(done.stdout)["decision"]


def test_the_entry_is_appended_and_every_other_byte_is_kept(workdir: Path) -> None:
    ws = make_workspace(workdir / "ws", keel_toml=_TOML)
    assert _url_verdict(ws, "http://127.0.0.1:8080/") == "deny"
    done = keel("allow-host", "127.0.0.1:8080", workspace=ws)
    assert done.returncode == 0, done.stderr
    assert 'allowed "127.0.0.1:8080"' in done.stdout
    expected = _TOML.replace(
        '    "files.pythonhosted.org",\n', '    "files.pythonhosted.org",\n    "127.0.0.1:8080",\n'
    )
    assert (ws / "keel.toml").read_text() == expected
    assert _url_verdict(ws, "http://127.0.0.1:8080/") == "allow"
    assert _url_verdict(ws, "http://127.0.0.1:8081/") == "deny"  # that port only


@pytest.mark.parametrize(
    ("toml", "host", "expected"),
    [
        ('[policy]\npreset = "strict"\n', "Example.COM", '[policy]\npreset = "strict"\nnetwork_allow = ["example.com"]\n'),  # noqa: E501
        ('[scope]\ninclude = ["src/**"]\n', "[::1]:9000", '[scope]\ninclude = ["src/**"]\n\n[policy]\nnetwork_allow = ["[::1]:9000"]\n'),  # noqa: E501
        ('[policy]\nnetwork_allow = ["a.example"]  # one\n', "*.b.example", '[policy]\nnetwork_allow = ["a.example", "*.b.example"]  # one\n'),  # noqa: E501
        ('[policy]\nnetwork_allow = []\n', "0x7f.1:80", '[policy]\nnetwork_allow = ["127.0.0.1:80"]\n'),  # noqa: E501
    ],
)  # fmt: skip
def test_the_key_and_the_table_are_added_where_missing(
    workdir: Path, toml: str, host: str, expected: str
) -> None:
    ws = make_workspace(workdir / "ws", keel_toml=toml)
    done = keel("allow-host", host, workspace=ws)
    assert done.returncode == 0, done.stderr
    assert (ws / "keel.toml").read_text() == expected


def test_a_host_already_allowed_changes_nothing(workdir: Path) -> None:
    ws = make_workspace(workdir / "ws", keel_toml=_TOML)
    before = (ws / "keel.toml").stat()
    done = keel("allow-host", "--json", "PyPI.org", workspace=ws)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] is False
    after = (ws / "keel.toml").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize(
    "host",
    ["exa mple.com", "example.com:0", "example.com:65536", "example.com:http", "http://x.test",
     "x.test/path", "*", "a*b.test", "*.*.test", "[::1", "", "1.2.3.999", "bad\nhost"],
)  # fmt: skip
def test_a_malformed_host_is_refused_and_keel_toml_is_untouched(workdir: Path, host: str) -> None:
    ws = make_workspace(workdir / "ws", keel_toml=_TOML)
    done = keel("allow-host", "--json", host, workspace=ws)
    assert done.returncode == 2, done.stdout
    error = json.loads(done.stderr)["error"]
    assert (error["code"], error["host"]) == ("usage.bad_host", host)
    assert (ws / "keel.toml").read_text() == _TOML


def test_an_entry_it_cannot_add_in_place_is_refused(workdir: Path) -> None:
    toml = 'policy.preset = "strict"\npolicy.network_allow = ["pypi.org"]\n'  # dotted keys
    ws = make_workspace(workdir / "ws", keel_toml=toml)
    done = keel("allow-host", "example.com", workspace=ws)
    assert done.returncode == 1
    assert "[config.edit]" in done.stderr and "by hand" in done.stderr
    assert (ws / "keel.toml").read_text() == toml


def test_an_invalid_keel_toml_is_refused_unchanged(workdir: Path) -> None:
    toml = '[policy]\npreset = "lenient"\n'
    ws = make_workspace(workdir / "ws", keel_toml=toml)
    done = keel("allow-host", "example.com", workspace=ws)
    assert done.returncode == 1
    assert "keel.toml" in done.stderr and "[config." in done.stderr
    assert (ws / "keel.toml").read_text() == toml


def test_without_a_keel_toml_one_is_made_with_the_defaults_it_had(workdir: Path) -> None:
    ws = make_workspace(workdir / "ws", git=True)
    preset = json.loads(keel("policy", "explain", "--json", workspace=ws, check=True).stdout)
    done = keel("allow-host", "--json", "example.com", workspace=ws)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] is True
    after = json.loads(keel("policy", "explain", "--json", workspace=ws, check=True).stdout)
    assert after["preset"] == preset["preset"] == "developer"
    assert _url_verdict(ws, "https://example.com/") == "allow"


def test_outside_a_workspace_it_is_an_error_and_writes_nothing(workdir: Path) -> None:
    here = make_workspace(workdir / "plain")  # no keel.toml, no git repository
    done = keel("allow-host", "example.com", cwd=here)
    assert done.returncode == 2
    assert "[usage.no_workspace]" in done.stderr
    assert list(here.iterdir()) == []
