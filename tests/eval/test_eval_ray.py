"""``keel eval --ray``: the same report as locally, each run a Ray task.

``auto`` starts a Ray instance on this machine (bound to 127.0.0.1, no dashboard) for the
evaluation and stops it afterwards, leaving no Ray process behind; ``--ray HOST:PORT`` joins a
running one (here a ``ray start --head`` on 127.0.0.1). Skipped when Ray cannot be installed
here, failed when ``KEEL_REQUIRE_ALL=1`` (CI installs it with ``.[dev]``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import (
    ARMS,
    EXAMPLES,
    REPEAT,
    SCRIPTS,
    TASKS,
    report_of,
    results_lines,
    run_eval,
    without_times,
)

from _support import keel, skip_or_fail
from keel.core.errors import RunError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))
from fake_chat import FakeChat

pytestmark = pytest.mark.slow


def require_ray() -> None:
    if find_spec("ray") is None:
        skip_or_fail("Ray is not installed (pip install 'keel-guard[ray]')")


def processes_naming(marker: str) -> list[int]:
    """The processes whose command line contains ``marker`` (Ray's carry their temp dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_text(errors="replace"):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile
            continue
    return found


def test_ray_gives_the_same_report_as_the_local_pool(workdir: Path) -> None:
    require_ray()
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
    # the Ray `auto` started (its GCS, raylet, agents, workers: all named by its temp dir,
    # keel-ray-*) went with the evaluation, the monitor keel ends early included (the
    # raylet's own children may take a moment after it to notice)
    deadline = time.monotonic() + 15
    while processes_naming("/keel-ray-") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming("/keel-ray-") == []


@pytest.fixture
def running_ray(workdir: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A Ray head on 127.0.0.1 (``ray start --block``, 2 CPUs): its address and environment.

    Its processes carry ``workdir/r`` (their temp dir); they are all ended afterwards. Token
    authentication is off for it and its drivers (``RAY_AUTH_MODE=disabled``).
    """
    temp = workdir / "r"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # fmt: skip
    for name in [n for n in env if n == "RAY_ADDRESS" or n.startswith("OPENAI_")]:
        env.pop(name)  # the cluster's own environment: none of the evaluation's model
    ray = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [str(ray), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", "0",
         "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats",
         "--temp-dir", str(temp)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        address = _head_address(temp, head)
        yield address, {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
        for pid in processes_naming(str(temp)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _head_address(temp: Path, head: subprocess.Popen[bytes]) -> str:
    """The GCS address ``ray start`` writes once its node is up (``TEMP/ray_current_cluster``)."""
    written = temp / "ray_current_cluster"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert head.poll() is None, f"ray start exited {head.returncode}"
        if written.is_file() and written.read_text().strip():
            time.sleep(1)  # written before the raylet registers; ray.init would wait anyway
            return written.read_text().strip()
        time.sleep(0.2)
    raise AssertionError("ray start did not come up in 120 s")


def scripted_turns() -> list[Any]:
    """The shipped scripts as FakeChat turns: the task is found by its text in the request."""
    scripts = {}
    for script in sorted(SCRIPTS.glob("*.json")):
        task = tomllib.loads((EXAMPLES / "tasks" / script.stem / "task.toml").read_text())
        scripts[json.dumps(task["task"])[1:-1]] = json.loads(script.read_text())

    def turn(index: int) -> Any:
        def calls(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
            text = json.dumps(body.get("messages") or [])
            steps = next(v for k, v in scripts.items() if k in text)
            step = steps[min(index, len(steps) - 1)]
            return [(c["name"], c["arguments"]) for c in step["tool_calls"]]

        return calls

    return [turn(i) for i in range(max(len(json.loads(s.read_text())) for s in
                                       SCRIPTS.glob("*.json")))]  # fmt: skip


def test_ray_joins_a_running_cluster_on_the_loopback(
    workdir: Path, running_ray: tuple[str, dict[str, str]]
) -> None:
    # Joining 127.0.0.1:PORT from this machine: the driver must take part as 127.0.0.1 too
    # (Ray gives it the machine's address otherwise, and retries forever). The model is a
    # Chat Completions server only keel eval's environment names (OPENAI_BASE_URL): the
    # cluster's workers, started by `ray start`, have their own environment, so the runs
    # reach it only if the evaluation carries the model's variables to them.
    require_ray()
    address, env = running_ray
    state = workdir / "state"
    state.mkdir(mode=0o700)
    with FakeChat(scripted_turns()) as chat:
        env = {**env, "KEEL_STATE_DIR": str(state), "OPENAI_BASE_URL": chat.url}
        arms = [a for arm in ARMS for a in ("--arm", arm)]
        done = keel("eval", str(EXAMPLES), "--model", "openai:scripted", *arms, "--repeat",
                    str(REPEAT), "--out", str(workdir / "joined"), "--json", "--ray", address,
                    cwd=workdir, env=env, timeout=300)  # fmt: skip
        joined = report_of(done)
        assert chat.requests, "no run reached the model"
    header, *lines = results_lines(workdir / "joined")
    assert (header["ray"], len(lines)) == (address, len(TASKS) * REPEAT * 2)
    assert all(not line.get("error") for line in lines), [line["error"] for line in lines]
    by_arm = {a["arm"]: a for a in joined["arms"]}
    assert by_arm["keel"]["success"]["total"] == len(TASKS) * REPEAT
    assert by_arm["bare"]["success"]["total"] == sum(t["bare"] for t in TASKS.values()) * REPEAT


def test_without_ray_the_error_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from keel.eval import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(RunError) as caught:
        import_ray()
    assert caught.value.code == "eval.ray_missing"
    assert "keel install ray" in caught.value.message
