"""Benchmark: the hook round trip with the journal on PostgreSQL vs on SQLite (goal ≤ 1.5x).

Two workspaces that differ only in ``[journal]``: none (``.keel/journal.db``, SQLite in WAL
mode) and ``url`` naming a PostgreSQL 15 server this script starts (``tests/_support``'s
``start_server``: initdb + pg_ctl, 127.0.0.1, password from ``PGPASSWORD``, ``fsync`` on).
Each round runs, as fresh processes of the hook command ``keel init --agent claude``
registers, a Claude Code ``PreToolUse`` in each workspace, paired and in alternating order:
a ``Read`` of a file in the workspace (allowed; the call, the decision, the request id and the
session state in one journal transaction) and ``ls`` (allowed, rewritten into ``keel exec``).
Answered by each workspace's ``keel hookd`` (started by the warm-up rounds; it holds one
journal connection), and, for reference, in process (``KEEL_HOOKD=0``: each hook process
connects to PostgreSQL itself). Every call uses a new session. Reported: the median of each,
the ratio of the medians and the median of the per-round ratios (paired).

Run: ``.venv/bin/python bench/bench_journal_pg.py [--rounds N] [--no-inproc]``.
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
sys.path.insert(0, str(REPO / "tests"))  # _support.postgres: the server the tests use


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("KEEL_HOOKD", None)
    env.update(extra)
    return env


def _workspace(journal: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix="keel-bench-pg-", dir="/tmp"))
    root.chmod(0o755)
    (root / "keel.toml").write_text(f'[policy]\npreset = "developer"\n{journal}')
    past = time.time() - 60  # an old keel.toml, as in a real project: cacheable at once
    os.utime(root / "keel.toml", (past, past))
    (root / "a.txt").write_text("a\n")
    (root / ".keel").mkdir()  # as after `keel init`
    return root


def _payload(root: Path, case: str, session: str) -> bytes:
    if case == "read":
        tool = {"tool_name": "Read", "tool_input": {"file_path": str(root / "a.txt")}}
    else:
        tool = {"tool_name": "Bash", "tool_input": {"command": "ls"}}
    body = {"session_id": session, "cwd": str(root), "hook_event_name": "PreToolUse", **tool}
    return json.dumps(body).encode()


def _time(argv: list[str], data: bytes, cwd: Path, env: dict[str, str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(argv, input=data, cwd=cwd, capture_output=True, check=False, env=env)
    ms = (time.perf_counter() - start) * 1000
    if done.returncode != 0 or b'"deny"' in done.stdout:
        raise RuntimeError(f"the hook did not allow: {done.stdout!r} {done.stderr[-400:]!r}")
    return ms, done.stdout


def _summary(sqlite: list[float], pg: list[float]) -> dict[str, float]:
    ms, mp = statistics.median(sqlite), statistics.median(pg)
    paired = statistics.median(p / s for s, p in zip(sqlite, pg, strict=True))
    return {
        "sqlite_ms": round(ms, 2),
        "postgres_ms": round(mp, 2),
        "ratio_of_medians": round(mp / ms, 2),
        "paired_ratio": round(paired, 2),
    }


def run(rounds: int, inproc: bool) -> dict[str, object]:
    from _support.postgres import start_server
    from keel.hook.install import default_keel_command

    server = start_server()
    server.stop()  # again with fsync on: the commit waits for the disk, as on a real server
    server._run(  # pyright: ignore[reportPrivateUsage]
        "pg_ctl", "-D", str(server.data), "-l", str(server.log), "-o",
        f"-p {server.port} -k {server.dir} -c listen_addresses=127.0.0.1", "-w", "start",
    )  # fmt: skip
    spaces = {
        "sqlite": _workspace(""),
        "postgres": _workspace(f'\n[journal]\nurl = "{server.url()}"\n'),
    }
    argv = [*default_keel_command(), "hook", "PreToolUse", "--agent", "claude"]
    modes = {"hookd": _env(KEEL_HOOKD_IDLE="300", **server.env())}
    if inproc:
        modes["in process"] = _env(KEEL_HOOKD="0", **server.env())
    times: dict[str, list[float]] = {}
    try:
        for i in range(-3, rounds):
            if i == -1:
                for root in spaces.values():
                    wait_for_hookd(root)
            for mode, env in modes.items():
                for case in ("read", "ls"):
                    order = list(spaces.items())
                    if i % 2:
                        order.reverse()
                    for backend, root in order:
                        session = f"bench-{i}-{mode}-{case}"
                        ms, _ = _time(argv, _payload(root, case, session), root, env)
                        if i >= 0:
                            times.setdefault(f"{case} [{mode}] {backend}", []).append(ms)
        verified = {
            name: subprocess.run(
                [str(Path(sys.executable).with_name("keel")), "verify", "-w", str(root)],
                capture_output=True,
                text=True,
                env=_env(**server.env()),
                check=False,
            ).stdout.strip()
            for name, root in spaces.items()
        }
    finally:
        for root in spaces.values():
            shutil.rmtree(root, ignore_errors=True)  # each daemon sees its socket go and exits
        server.destroy()
    result: dict[str, object] = {"rounds": rounds, "verify": verified}
    for mode in modes:
        for case in ("read", "ls"):
            result[f"{case} [{mode}]"] = _summary(
                times[f"{case} [{mode}] sqlite"], times[f"{case} [{mode}] postgres"]
            )
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--no-inproc", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run(args.rounds, not args.no_inproc), indent=2))


if __name__ == "__main__":
    main()
