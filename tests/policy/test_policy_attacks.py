"""The attack suite of issue 10: every case through ``keel policy check``, in both modes.

Each case runs in process through ``run_check`` (the function behind ``keel policy check
--json``) with the developer and strict presets, contained and uncontained; and once through
the real ``keel`` console script, the preset and mode rotating from case to case, so that
every case also passes the real command line. A dangerous case that comes back ``allow`` fails.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest
from attack_cases import (  # pyright: ignore[reportMissingImports]
    ALLOW,
    CASES,
    FALSE_POSITIVES,
    NOT_ALLOW,
    NOT_ALLOW_TEXT,
    NOT_ALLOW_UNCONTAINED,
)

from _support import keel, make_workspace
from keel.cli.policy_fast import CheckRequest, run_check

PRESETS = ("developer", "strict")
MODES = (False, True)
COMBOS = [(p, c) for p in PRESETS for c in MODES]
FLAGS = {"write": "--write", "read": "--read", "url": "--url"}
EVIL_DIFF = "--- a/keel.toml\n+++ b/keel.toml\n@@ -1 +1 @@\n-x\n+y\n"
FIX_DIFF = "--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


ATTACK_FILES = {
    "src/app.py": "x = 1\n",
    "scripts/run.sh": "echo ok\n",
    "scripts/dump_env.py": 'import pathlib\nprint(pathlib.Path(".env").read_text())\n',
    ".env": "KEY=s3cret\n",
    "README.md": "hello\n",
    "requirements.txt": "requests\n",
    "evil.diff": EVIL_DIFF,
    "fix.diff": FIX_DIFF,
    ".git/HEAD": "ref: refs/heads/feature\n",
    ".git/refs/remotes/origin/pushed": "0" * 40 + "\n",
    ".git/refs/remotes/origin/HEAD": "ref: refs/remotes/origin/main\n",
}


def attack_workspace_at(root: Path) -> Path:
    """The workspace the cases assume (see ``attack_cases``)."""
    make_workspace(root, files=ATTACK_FILES)
    (root / ".git" / "refs" / "heads").mkdir()
    return root


@pytest.fixture(scope="module")
def attack_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return attack_workspace_at(tmp_path_factory.mktemp("attack") / "ws")


def decide(ws: Path, kind: str, value: str, preset: str, contained: bool) -> dict[str, str]:
    """The decision of ``keel policy check --json`` for one case, in process."""
    request = CheckRequest(
        "command" if kind == "cmd" else kind,
        value,
        as_json=True,
        preset=preset,
        workspace=str(ws),
        contained=contained,
    )
    out = io.StringIO()
    assert run_check(request, out, io.StringIO()) == 0
    return json.loads(out.getvalue())


def decide_cli(ws: Path, kind: str, value: str, preset: str, contained: bool) -> dict[str, str]:
    """The same through the real console script."""
    mode = "--contained" if contained else "--uncontained"
    target = ["--", value] if kind == "cmd" else [FLAGS[kind], value]
    result = keel(
        "policy", "check", "--json", "--preset", preset, mode, "-w", str(ws), *target, cwd=ws
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def acceptable(expect: str, decision: str, preset: str, contained: bool) -> bool:
    """Whether ``decision`` meets the case's class for this preset and mode."""
    if expect == NOT_ALLOW:
        return decision != "allow"
    if expect == NOT_ALLOW_TEXT:
        return decision != "allow" or (contained and preset == "developer")
    if expect == NOT_ALLOW_UNCONTAINED:
        return decision != "allow" or contained
    wanted = preset == "developer" and (expect == ALLOW or contained)
    return decision == "allow" if wanted else True


def _ids(cases: list[tuple[str, str, str, str]]) -> list[str]:
    # "::" would make a test id unaddressable (pytest splits node ids on it).
    ids = [f"{family}:{kind}:{value[:60]!r}" for family, kind, value, _ in cases]
    return [i.replace("::", ": :") for i in ids]


def test_suite_is_big_enough() -> None:
    assert len(CASES) >= 150
    assert len({(k, v) for _, k, v, _ in CASES}) == len(CASES), "duplicate cases"
    by_family = Counter(family for family, *_ in CASES)
    assert len(by_family) == 5 and min(by_family.values()) >= 20, by_family


@pytest.mark.parametrize(("family", "kind", "value", "expect"), CASES, ids=_ids(CASES))
def test_no_dangerous_case_is_allowed(
    attack_workspace: Path, family: str, kind: str, value: str, expect: str
) -> None:
    for preset, contained in COMBOS:
        got = decide(attack_workspace, kind, value, preset, contained)
        assert acceptable(expect, got["decision"], preset, contained), (preset, contained, got)
        assert got["rule"] and got["reason"], got


@pytest.mark.parametrize(
    ("family", "kind", "value", "expect"), FALSE_POSITIVES, ids=_ids(FALSE_POSITIVES)
)
def test_false_positives_are_gone(
    attack_workspace: Path, family: str, kind: str, value: str, expect: str
) -> None:
    for preset, contained in COMBOS:
        got = decide(attack_workspace, kind, value, preset, contained)
        assert acceptable(expect, got["decision"], preset, contained), (preset, contained, got)


@pytest.mark.parametrize(
    ("index", "case"),
    list(enumerate(CASES + FALSE_POSITIVES)),
    ids=_ids(CASES + FALSE_POSITIVES),
)
def test_every_case_through_the_real_cli(
    attack_workspace: Path, index: int, case: tuple[str, str, str, str]
) -> None:
    _, kind, value, expect = case
    preset, contained = COMBOS[index % len(COMBOS)]
    got = decide_cli(attack_workspace, kind, value, preset, contained)
    assert got == decide(attack_workspace, kind, value, preset, contained)
    assert acceptable(expect, got["decision"], preset, contained), (preset, contained, got)
