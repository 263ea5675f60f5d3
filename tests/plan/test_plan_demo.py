from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from keel.demo import plans


def test_demo_runs_both_seed_scenarios(workdir: Path) -> None:
    out = io.StringIO()
    plans.run(Console(file=out, width=200), workdir)
    text = out.getvalue()
    assert "数据库主机为：db.internal" in text
    assert "数据库主机为：localhost" in text
    assert "配置文件 config.yaml 未找到" in text
    assert "'销售额' is not among" in text
    assert (workdir / "plans-repo" / "report.txt").read_text(
        encoding="utf-8"
    ) == "营收 总和：2841.5\n"
