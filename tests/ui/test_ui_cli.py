"""``keel ui`` as a command: a clear error without its extra, nothing heavy elsewhere."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from _support import keel, keel_env

PROGRAM = """
import sys
{prelude}
from keel.cli._entry import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ('starlette', 'uvicorn', 'keel.ui') if m in sys.modules)
print('HEAVY', heavy)
sys.exit(code)
"""


def _run(workdir: Path, *argv: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM.format(prelude=prelude), *argv],
        cwd=workdir, env=keel_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_without_the_ui_extra_keel_ui_says_how_to_install_it(workdir: Path) -> None:
    missing = "sys.modules['uvicorn'] = None  # as if keel-guard[ui] were not installed"
    done = _run(workdir, "ui", "--no-browser", "-w", str(workdir), prelude=missing)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "keel ui needs keel-guard[ui] (uvicorn is not installed)" in done.stderr
    assert "keel install ui" in done.stderr and "[ui.not_installed]" in done.stderr
    assert "http://" not in done.stdout


def test_other_commands_import_neither_the_server_nor_keel_ui(workdir: Path) -> None:
    done = _run(workdir, "status", "-w", str(workdir))
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout


def test_a_port_in_use_is_a_clear_error(workdir: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        done = keel("ui", "--no-browser", "--port", port, workspace=workdir)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "[ui.bind]" in done.stderr
