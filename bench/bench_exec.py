"""``keel exec -- true`` against ``python -S -c pass``: what containing a shell call costs.

Method: a fresh per-user state directory and four 0755 workspaces: ``quiet`` (strict preset, so
no network: no proxy), ``net`` (developer preset: its allowlist puts the proxy's listener in
the sandbox; the workspace's ``keel hookd`` runs, as it does once a hook has answered, and
serves the proxy), ``solo`` (the same without a daemon: ``keel exec`` forks to place the
listener and serves it itself) and ``big`` (strict, 5,000 files in 550 directories, to show the
two control-file walks). keel's modules are byte-compiled first (an installed wheel is), and
one warm-up run per variant fills the caches (config view, exec backend verdict, seccomp
filter, ``/etc`` copy, the daemon's namespace helper). Then every round runs each variant
once, in an order rotated every round, so load spikes from other jobs on the machine hit all
of them alike; medians and p10/p90 over the rounds, and the median of each round's ratio to
the baseline (``per round``). Each variant is a real subprocess with stdout to ``/dev/null``:
``keel exec`` is the console script, ``exec_argv`` the command line the hooks rewrite a shell
call into (``python -I -S <keel>/_launch.py exec``); ``ratio`` is the median over the median
of ``python -S -c pass`` with the same interpreter. Also timed in process: one control-file
walk of ``big`` (``scan_controls``, default depth 6).

Runs are ``GAP`` apart, untimed, as an agent's commands are (seconds apart: a model call
between two): without a daemon, ``keel exec`` journals its run from a detached fork after it
has exited (~40 ms of CPU), and back-to-back runs on two cores would measure the forks of
earlier rounds, not the command. With the daemon, the daemon journals it.
"""

from __future__ import annotations

import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keel
from keel.core.isolated import launcher_argv
from keel.sandbox import exec_argv, exec_backend
from keel.sandbox.exec._control import ControlRules, scan_controls

ROUNDS = int(os.environ.get("KEEL_BENCH_ROUNDS", "40"))
KEEL = str(Path(sys.executable).with_name("keel"))
STRICT = '[policy]\npreset = "strict"\n'


def _workspace(base: Path, name: str, config: str, files: int = 0) -> Path:
    ws = base / name
    ws.mkdir(mode=0o755)
    (ws / "keel.toml").write_text(config)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    for i in range(files):
        folder = ws / f"pkg{i // 100}" / f"mod{(i // 10) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i % 10}.py").write_text("x = 1\n")
    return ws


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} exited {done.returncode}")
    return elapsed


GAP = 0.15
"""Seconds between two timed runs (see the module)."""


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _variants(ws: dict[str, Path]) -> list[tuple[str, list[str], Path]]:
    python = os.path.realpath(sys.executable)
    true = shutil.which("true") or "/bin/true"
    quiet, net = ws["quiet"], ws["net"]
    out = [
        ("python -S -c pass (baseline)", [python, "-S", "-c", "pass"], quiet),
        ("true (plain subprocess)", [true], quiet),
        ("keel exec -- true", [KEEL, "exec", "--", true], quiet),
        ("exec_argv (python -I -S launcher)", exec_argv(quiet, [true]), quiet),
        ("keel exec -- true, network allowlist", [KEEL, "exec", "--", true], net),
        ("exec_argv, network allowlist", exec_argv(net, [true]), net),
        ("exec_argv, network, no daemon", exec_argv(ws["solo"], [true]), ws["solo"]),
        ("keel exec -- true, 5,000-file workspace", [KEEL, "exec", "--", true], ws["big"]),
    ]
    if exec_backend("landlock")[0] == "landlock":
        landlock = [KEEL, "exec", "--backend", "landlock", "--", true]
        out.append(("keel exec --backend landlock -- true", landlock, quiet))
    return out


def _start_daemon(root: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The workspace's ``keel hookd`` (as a hook starts it), once its proxy socket is there."""
    argv = launcher_argv("hookd", str(root), site=False)
    daemon = subprocess.Popen(
        argv, env={**env, "KEEL_HOOKD_IDLE": "3600"}, stdout=subprocess.DEVNULL
    )
    for _ in range(500):
        if (root / ".keel" / "proxy.sock").exists() and (root / ".keel" / "hookd.pid").exists():
            return daemon
        time.sleep(0.02)
    daemon.kill()
    raise SystemExit("keel hookd did not start")


def _walk(big: Path) -> list[float]:
    rules = ControlRules(6, True)
    samples = []
    for _ in range(50):
        start = time.perf_counter()
        scan_controls(str(big), rules)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    compileall.compile_dir(os.path.dirname(keel.__file__), quiet=1)
    base = Path(tempfile.mkdtemp(prefix="keel-bench-exec-", dir="/tmp"))
    base.chmod(0o755)
    state = base / "state"
    env = {**os.environ, "KEEL_STATE_DIR": str(state)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    daemon: subprocess.Popen[bytes] | None = None
    try:
        developer = '[policy]\npreset = "developer"\n'
        ws = {
            "quiet": _workspace(base, "quiet", STRICT),
            "net": _workspace(base, "net", developer),
            "solo": _workspace(base, "solo", developer),
            "big": _workspace(base, "big", STRICT, files=5000),
        }
        daemon = _start_daemon(ws["net"], env)
        load = os.getloadavg()[0]
        variants = _variants(ws)
        for _, argv, cwd in variants:
            _timed(argv, cwd, env)
        samples: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        for i in range(ROUNDS):
            k = i % len(variants)
            for name, argv, cwd in variants[k:] + variants[:k]:
                samples[name].append(_timed(argv, cwd, env))
                time.sleep(GAP)
        baseline = samples[variants[0][0]]
        base_median = statistics.median(baseline)
        end = os.getloadavg()[0]
        print(f"backend: {exec_backend()[1]}; rounds: {ROUNDS}; load: {load:.1f} -> {end:.1f}")
        for name, values in samples.items():
            median = statistics.median(values)
            paired = statistics.median(v / b for v, b in zip(values, baseline, strict=True))
            print(
                f"{name:<42} median {median:6.1f} ms  p10 {_quantile(values, 0.1):6.1f}  "
                f"p90 {_quantile(values, 0.9):6.1f}  ratio {median / base_median:4.2f}x  "
                f"per round {paired:4.2f}x"
            )
        walk = _walk(ws["big"])
        label = "control-file walk, 5,000 files (in process)"
        print(
            f"{label:<42} median {statistics.median(walk):6.2f} ms  p90 {_quantile(walk, 0.9):6.2f}"
        )
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(10)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
