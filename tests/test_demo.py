"""`keel demo` runs every section end to end (each section raises if keel misbehaves)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from keel.demo import SECTIONS

KEEL = str(Path(sys.executable).with_name("keel"))


def test_core_and_hooks_sections_run() -> None:
    out = subprocess.run(
        [KEEL, "demo", "--section", "core", "--section", "hooks"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "2 section(s) ran as expected" in out.stdout
    assert "risk.git_force_push" in out.stdout and "stop.active" in out.stdout
    assert "hash chain intact" in out.stdout


def test_every_section_is_a_module_with_run() -> None:
    import importlib

    names = [name for name, _ in SECTIONS]
    assert names[0] == "core" and len(set(names)) == len(names)
    for name in names:
        assert callable(importlib.import_module(f"keel.demo.{name}").run)


def test_the_containment_section_shows_every_promise_held() -> None:
    out = subprocess.run(
        [KEEL, "demo", "--section", "contain"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 section(s) ran as expected" in out.stdout
    assert out.stdout.count(" yes ") == 6 and " NO " not in out.stdout
