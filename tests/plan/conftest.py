"""Fixtures for the plan tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def root(workdir: Path) -> Path:
    """A workspace with a text file, a JSON document, a broken one and a CSV file."""
    (workdir / "a.txt").write_text("hello")
    (workdir / "c.json").write_text('{"a": {"b": 7}}')
    (workdir / "bad.json").write_text("{")
    (workdir / "d.csv").write_text("x,y\n1,2\n")
    return Path(os.path.realpath(workdir))
