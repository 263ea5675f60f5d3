"""Sandboxed vs unsandboxed: the extra milliseconds a probe pays for isolation.

Method: one 0755 workspace holding a 64 KiB file. The probe is ``/usr/bin/python3 -c`` that
reads the file and prints its sha256 (the shape of a plan probe). Every round runs each pair
below, the two sides in an order that alternates every round, and all pairs round-robin so a
load spike hits them alike: (a) the probe as a plain ``subprocess.run`` with cwd at the
workspace (the baseline; as uid 65534 when root, like the sandbox) against the same probe
through ``get_sandbox(backend=...).run(..., mode="probe")`` for bwrap and Landlock; (b) bwrap
started directly with the exact argv keel builds, to separate bwrap's own cost from keel's
plumbing; (c) ``run_python("keel.sandbox.probe._selftest")`` (interpreter, keel and PyYAML imports)
against its unsandboxed twin. Five warm-up rounds first; detection and the seccomp blob are
built once per process and reported separately. Prints medians and the paired difference
(p10, median, p90).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from keel.config import SandboxConfig
from keel.core.errors import SandboxError
from keel.sandbox import detect, get_sandbox

PROBE = "import hashlib,sys; print(hashlib.sha256(open('data.bin','rb').read()).hexdigest())"


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


Pair = tuple[str, Callable[[], object], Callable[[], object]]


def _compare(pairs: list[Pair], n: int) -> None:
    """Round-robin over every pair, alternating which side of a pair runs first."""
    for _ in range(5):
        for _, base, sandboxed in pairs:
            base()
            sandboxed()
    plain: dict[str, list[float]] = {name: [] for name, _, _ in pairs}
    boxed: dict[str, list[float]] = {name: [] for name, _, _ in pairs}
    for i in range(n):
        for name, base, sandboxed in pairs:
            if i % 2:
                boxed[name].append(_timed(sandboxed))
                plain[name].append(_timed(base))
            else:
                plain[name].append(_timed(base))
                boxed[name].append(_timed(sandboxed))
    for name, _, _ in pairs:
        diff = [b - p for p, b in zip(plain[name], boxed[name], strict=True)]
        print(
            f"{name:<34} plain {statistics.median(plain[name]):7.2f} ms  sandboxed "
            f"{statistics.median(boxed[name]):7.2f} ms  extra median "
            f"{statistics.median(diff):+6.2f} ms "
            f"(p10 {_quantile(diff, 0.1):+6.2f}, p90 {_quantile(diff, 0.9):+6.2f})"
        )


def _plain(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Callable[[], object]:
    drop = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}
    full_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **(env or {})}

    def run() -> object:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, env=full_env, check=True, **drop)  # type: ignore[arg-type]
        return done.stdout

    return run


def _raw_bwrap(sandbox: object, base: Path, argv: list[str]) -> Callable[[], object]:
    """bwrap started directly with the argv keel builds: isolates keel's own plumbing cost."""
    from keel.sandbox.os import _seccomp
    from keel.sandbox.probe import _common
    from keel.sandbox.probe._bwrap import BwrapSandbox

    assert isinstance(sandbox, BwrapSandbox)
    env = _common.sandbox_env(None)
    drop = {"user": 65534, "group": 65534, "extra_groups": []} if os.geteuid() == 0 else {}

    def run() -> object:
        seccomp = _seccomp.blob_fd()
        read_end, write_end = os.pipe()
        try:
            args = sandbox._args(base, "probe", env, (), seccomp, write_end)  # pyright: ignore[reportPrivateUsage]
            return subprocess.run(
                [*args, "--", *argv], capture_output=True, pass_fds=(seccomp, write_end), **drop
            )  # type: ignore[call-overload]
        finally:
            for fd in (seccomp, read_end, write_end):
                os.close(fd)

    return run


def main(n: int = 30) -> None:
    base = Path(tempfile.mkdtemp(prefix="keel-bench-sbx-", dir="/tmp"))
    base.chmod(0o755)
    try:
        (base / "data.bin").write_bytes(os.urandom(64 << 10))
        (base / "data.bin").chmod(0o644)
        config = SandboxConfig()
        t0 = time.perf_counter()
        report = detect(config)
        took = (time.perf_counter() - t0) * 1000
        print(f"detect(): {took:.1f} ms, once per process; chosen {report.chosen}")
        argv = ["/usr/bin/python3", "-c", PROBE]
        pairs: list[Pair] = []
        for backend in ("bwrap", "landlock"):
            if not report.status(backend).available:
                print(f"{backend}: unavailable ({report.status(backend).reason})")
                continue
            sandbox = get_sandbox(config, backend=backend)
            run = lambda s=sandbox: s.run(argv, workspace=base, mode="probe", timeout=30)  # noqa: E731
            pairs.append((f"{backend}: python3 -c sha256", _plain(argv, base), run))
        if report.status("bwrap").available:
            raw = _raw_bwrap(get_sandbox(config, backend="bwrap"), base, argv)
            pairs.append(("bwrap: same argv without keel", _plain(argv, base), raw))
        try:
            sandbox = get_sandbox(config)
        except SandboxError as exc:
            print(f"no sandbox: {exc}")
            return
        layout = report.python
        if layout.executable:
            env = {"PYTHONPATH": ":".join(layout.pythonpath), "PYTHONSAFEPATH": "1"}
            py = [layout.executable, "-s", "-P", "-B", "-m", "keel.sandbox.probe._selftest"]

            def run(sandbox=sandbox, base=base):
                return sandbox.run_python(
                    "keel.sandbox.probe._selftest", workspace=base, timeout=30
                )

            pairs.append((f"{sandbox.name}: run_python selftest", _plain(py, base, env), run))
        _compare(pairs, n)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
