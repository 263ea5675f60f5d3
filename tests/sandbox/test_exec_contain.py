"""``keel.sandbox.exec.contain``: the backend ``keel exec`` would use, and its launcher line.

``exec_backend`` reads the cached bwrap verdict unless asked to refresh it, for the backend
asked for: a cached verdict that bwrap fails must give the same answer as ``keel exec``.
"""

from __future__ import annotations

import marshal
import sys
from pathlib import Path

from keel.sandbox.exec._select import CACHE_NAME, _key
from keel.sandbox.exec.contain import LAUNCHER, exec_argv, exec_backend


def _cache_a_failing_bwrap(state: Path) -> None:
    (state / "cache").mkdir(parents=True)
    verdict = {"ok": False, "path": None, "reason": "cached: no user namespaces"}
    verdict["key"] = _key(None)
    (state / "cache" / CACHE_NAME).write_bytes(marshal.dumps(verdict))


def test_the_cached_verdict_is_used_unless_refreshed(tmp_path: Path) -> None:
    _cache_a_failing_bwrap(tmp_path)
    name, reason = exec_backend("bwrap", state_dir=str(tmp_path))
    assert (name, reason) == (None, "bwrap cannot run here: cached: no user namespaces")
    name, reason = exec_backend(state_dir=str(tmp_path))  # auto: falls back from bwrap
    assert name != "bwrap" and "cached: no user namespaces" in reason
    fresh_name, fresh_reason = exec_backend("bwrap", refresh=True, state_dir=str(tmp_path))
    assert "cached" not in fresh_reason
    assert exec_backend("bwrap", state_dir=str(tmp_path)) == (fresh_name, fresh_reason)


def test_exec_argv_is_the_launcher_line_with_the_limit_and_the_command() -> None:
    assert Path(LAUNCHER).is_file()
    command = ["bash", "-c", "make -j2"]
    assert exec_argv(Path("/w s"), command, timeout=1.5, python="/opt/py") == [
        "/opt/py", "-I", "-S", LAUNCHER, "exec", "--workspace", "/w s", "--timeout", "1.5",
        "--", "bash", "-c", "make -j2",
    ]  # fmt: skip
    assert exec_argv("/w", ["ls"], timeout=600.0) == [
        sys.executable, "-I", "-S", LAUNCHER, "exec", "--workspace", "/w", "--timeout", "600",
        "--", "ls",
    ]  # fmt: skip
    assert exec_argv("/w", ["--", "x"]) == [
        sys.executable, "-I", "-S", LAUNCHER, "exec", "--workspace", "/w", "--", "--", "x",
    ]  # fmt: skip
