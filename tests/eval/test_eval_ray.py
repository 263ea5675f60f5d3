"""``keel eval --ray auto``: the same report as locally, each run a Ray task on a local Ray.

``auto`` starts a Ray instance on this machine (bound to 127.0.0.1, no dashboard) for the
evaluation and stops it afterwards. Skipped when Ray cannot be installed here, failed when
``KEEL_REQUIRE_ALL=1`` (CI installs it with ``.[dev]``).
"""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import pytest
from eval_helpers import REPEAT, TASKS, report_of, results_lines, run_eval, without_times

from _support import skip_or_fail
from keel.core.errors import RunError

pytestmark = pytest.mark.slow


def test_ray_gives_the_same_report_as_the_local_pool(workdir: Path) -> None:
    if find_spec("ray") is None:
        skip_or_fail("Ray is not installed (pip install 'keel-guard[ray]')")
    state = workdir / "state"
    state.mkdir(mode=0o700)
    env = {"KEEL_STATE_DIR": str(state)}
    on_ray = report_of(run_eval(workdir / "ray", "--ray", "auto", "--jobs", "2", cwd=workdir,
                                env=env))  # fmt: skip
    local = report_of(run_eval(workdir / "local", "--jobs", "2", cwd=workdir, env=env))
    assert without_times(on_ray) == without_times(local)
    arms = {a["arm"]: a for a in on_ray["arms"]}
    runs = len(TASKS) * REPEAT
    assert arms["keel"]["success"]["total"] == runs
    assert arms["bare"]["success"]["total"] == sum(t["bare"] for t in TASKS.values()) * REPEAT
    header, *lines = results_lines(workdir / "ray")
    assert (header["ray"], header["jobs"], len(lines)) == ("auto", 2, 2 * runs)
    # the records are the same too, but for wall times and session ids (and their order: a
    # record is written when its run ends)
    volatile = ("wall_seconds", "session_id")
    records = {
        name: sorted(
            (json.dumps({k: v for k, v in r.items() if k not in volatile}, sort_keys=True)
             for r in results_lines(workdir / name)[1:]),
        )
        for name in ("ray", "local")
    }  # fmt: skip
    assert records["ray"] == records["local"]


def test_without_ray_the_error_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from keel.eval import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(RunError) as caught:
        import_ray()
    assert caught.value.code == "eval.ray_missing"
    assert "keel install ray" in caught.value.message
