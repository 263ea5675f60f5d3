from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from keel.demo import plans


def test_demo_runs_both_seed_scenarios(workdir: Path) -> None:
    out = io.StringIO()
    plans.run(Console(file=out, width=200), workdir)
    text = out.getvalue()
    assert "Database host: db.internal" in text
    assert "Database host: localhost" in text
    assert "config.yaml not found. Create a template?" in text
    assert "'sales' is not among" in text
    assert (workdir / "plans-repo" / "report.txt").read_text(
        encoding="utf-8"
    ) == "revenue total: 2841.5\n"
