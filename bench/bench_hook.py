"""Benchmark: the cost of keel's hook on every agent tool call.

1. Hook round trip: the hook command ``keel init`` registers (``python -I -S <keel>/_launch.py
   hook PreToolUse --agent claude < payload``) as a fresh process, against the interpreter's own
   start (``python -S -c pass``, the same interpreter), interleaved, for
   an allowed read-only command (``ls``: no checkpoint), an allowed changing command
   (``touch``: a checkpoint), a malformed payload (fails closed) and a usage error (the console
   entry point alone), each twice: answered by the resident ``keel hookd`` (the default; the
   daemon is started by the warm-up round) and in process (``KEEL_HOOKD=0``).
   ``python -c pass`` (with site, which a console script needs to find its packages) is
   measured too, for reference. ``--before-src DIR`` adds the same cases run against another
   source tree (``PYTHONPATH=DIR``), e.g. the code before a change, in the same rounds.
   Bytecode is written (``PYTHONDONTWRITEBYTECODE`` is dropped) and one untimed warm-up round
   fills the caches, as on a real machine after the first call. Every round uses a new
   session, so the monitor's repeat detector never changes what is measured.
2. A scripted Claude Code run (2 model turns, 1 Bash call) against a fake model on 127.0.0.1,
   with and without keel's hooks installed, interleaved: median wall time of each.

Run: ``.venv/bin/python bench/bench_hook.py [--rounds N] [--client-rounds M] [--before-src DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import wait_for_hookd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # _support, which the client harness imports
sys.path.insert(0, str(REPO / "tests" / "clients"))
sys.path.insert(0, str(REPO / "tests" / "clients" / "fakes"))


def keel_cmd() -> list[str]:
    """The hook command exactly as ``keel init --agent claude`` registers it."""
    from keel.hook.install import default_keel_command

    return default_keel_command()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("KEEL_HOOKD", None)
    env.update(extra)
    return env


def _time(
    argv: list[str], stdin: bytes | None, cwd: Path, env: dict[str, str]
) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, cwd=cwd, capture_output=True, check=False, env=env)
    return (time.perf_counter() - start) * 1000, proc.returncode


def _workspace() -> Path:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-", dir="/tmp"))
    root.chmod(0o755)
    (root / "keel.toml").write_text('[policy]\npreset = "developer"\n')
    past = time.time() - 60  # an old keel.toml, as in a real project: cacheable at once
    os.utime(root / "keel.toml", (past, past))
    (root / "a.txt").write_text("a\n")
    (root / ".keel").mkdir()  # as after `keel init`
    return root


def _payload(root: Path, command: str, n: int, session: str) -> bytes:
    return json.dumps(
        {
            "session_id": session,
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": f"toolu_bench{n}",
            "prompt_id": "p1",
            "permission_mode": "default",
        }
    ).encode()


def _cases(before_src: str | None) -> dict[str, tuple[str | None, dict[str, str]]]:
    daemon, inproc = _env(KEEL_HOOKD_IDLE="120"), _env(KEEL_HOOKD="0")
    cases: dict[str, tuple[str | None, dict[str, str]]] = {
        "python -c pass (with site, for reference)": ("<site>", inproc),
        "keel hook, usage error (entry point only)": ("<usage>", inproc),
    }
    modes = [("hookd", daemon), ("in process", inproc)]
    if before_src:
        modes.append(("before", _env(KEEL_HOOKD="0", PYTHONPATH=before_src)))
    for mode, env in modes:
        cases[f"ls (allow, read-only) [{mode}]"] = ("ls", env)
        cases[f"touch (allow, checkpoint) [{mode}]"] = ("touch b.txt", env)
        cases[f"bad payload [{mode}]"] = (None, env)
    return cases


def hook_round_trip(rounds: int, before_src: str | None = None) -> dict[str, object]:
    root = _workspace()
    base_argv = [sys.executable, "-S", "-c", "pass"]
    hook_argv = [*keel_cmd(), "hook", "PreToolUse", "--agent", "claude"]
    cases = _cases(before_src)
    times: dict[str, list[float]] = {name: [] for name in ["baseline", *cases]}
    codes: dict[str, set[int]] = {name: set() for name in cases}
    try:
        for i in range(-2, rounds):  # rounds -2 and -1 warm up: bytecode, caches, the daemon
            if i == -1:
                wait_for_hookd(root)
            ms = _time(base_argv, None, root, _env())[0]
            if i >= 0:
                times["baseline"].append(ms)
            for j, (name, (command, env)) in enumerate(cases.items()):
                session = f"bench-{i}-{j}"
                argv, data = (
                    hook_argv,
                    b"{bad" if command is None else _payload(root, str(command), i, session),
                )
                if name.endswith("[before]"):  # the launcher pins its own src: use -m instead
                    argv = [sys.executable, "-m", "keel.cli._entry", *hook_argv[-4:]]
                if command == "<site>":
                    argv, data = [sys.executable, "-c", "pass"], None
                elif command == "<usage>":
                    argv = hook_argv[:-2]
                ms, rc = _time(argv, data, root, env)
                if i < 0:
                    continue
                times[name].append(ms)
                codes[name].add(rc)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the daemon sees its socket go and exits
    base = statistics.median(times["baseline"])
    result: dict[str, object] = {"baseline_ms": round(base, 1), "rounds": rounds}
    for name in cases:
        med = statistics.median(times[name])
        result[name] = {
            "median_ms": round(med, 1),
            "ratio": round(med / base, 2),
            "exit_codes": sorted(codes[name]),
        }
    return result


def claude_runs(rounds: int) -> dict[str, object]:
    try:
        from client_harness import Turn, client_binary, make_base, new_project, run_client  # pyright: ignore[reportMissingImports, reportUnknownVariableType]
    except ImportError as exc:
        return {"skipped": str(exc)}
    try:
        client_binary("claude")
    except BaseException as exc:  # pytest.skip raises a BaseException subclass
        return {"skipped": str(exc)}
    walls: dict[str, list[float]] = {"without keel": [], "with keel": []}
    turns = [Turn(text="I'll run it.", tool="Bash", input={"command": "ls", "description": "list"})]
    for _ in range(rounds):
        for name in walls:
            base = make_base()
            try:
                project = new_project(base, '[policy]\npreset = "developer"\n')
                start = time.perf_counter()
                run = run_client("claude", project, turns, install=name == "with keel")
                walls[name].append((time.perf_counter() - start) * 1000)
                if run.proc.returncode != 0:
                    tail = run.proc.stderr[-500:]
                    return {"error": f"{name}: claude exited {run.proc.returncode}: {tail}"}
            finally:
                shutil.rmtree(base, ignore_errors=True)
    out: dict[str, object] = {"rounds": rounds}
    for name, values in walls.items():
        out[name] = {"median_ms": round(statistics.median(values), 1)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--client-rounds", type=int, default=5)
    parser.add_argument("--before-src", default=None, help="another src/ tree to compare")
    args = parser.parse_args()
    print("hook round trip vs interpreter start (interleaved medians)")
    print(json.dumps(hook_round_trip(args.rounds, args.before_src), indent=2))
    if args.client_rounds > 0:
        print("scripted Claude Code run (2 turns, 1 Bash call), with and without keel's hooks")
        print(json.dumps(claude_runs(args.client_rounds), indent=2))


if __name__ == "__main__":
    main()
