"""The workspace demo section runs end to end and says what it promised."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from keel.demo.workspace import run


def test_demo_section(workdir: Path) -> None:
    out = io.StringIO()
    run(Console(file=out, width=100, color_system=None), workdir)
    text = out.getvalue()
    assert "modified  src/app.py" in text
    assert "added     src/helper.py" in text
    assert "the tree is byte-identical" in text
    assert "[patch.hunk_failed]" in text
    assert "no file was written" in text
    assert "checkpoint, checkpoint, rollback, patch" in text
