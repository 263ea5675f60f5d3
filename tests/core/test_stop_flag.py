"""The emergency stop's fast check fails closed: only a missing flag means no stop."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import keel
from _support import skip_or_fail
from keel.core.stop import set_stop, stop_reason, stop_set


def test_no_flag_is_no_stop(workdir: Path) -> None:
    assert not stop_set(workdir) and stop_reason(workdir) is None


def test_a_set_flag_stops_with_its_reason(workdir: Path) -> None:
    set_stop(workdir, "audit")
    assert stop_set(workdir) and stop_reason(workdir) == "audit"


def test_a_flag_that_cannot_be_looked_at_is_a_stop(workdir: Path) -> None:
    # `.keel` made a file: the flag's lstat fails with ENOTDIR, not "no such file"
    (workdir / ".keel").write_text("not a directory")
    assert stop_set(workdir)
    assert stop_reason(workdir) is not None


def test_a_flag_behind_an_unreadable_directory_stops_another_user(workdir: Path) -> None:
    # keel.core is standard library only: a copy of it runs under the system interpreter as
    # a user who may not search .keel (root would bypass the permission check)
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None or shutil.which("setpriv") is None:
        skip_or_fail("needs /usr/bin/python3 and setpriv")
    package = Path(keel.__file__).parent
    lib = workdir / "lib" / "keel"
    shutil.copytree(package / "core", lib / "core", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(package / "__init__.py", lib / "__init__.py")
    ws = workdir / "ws"
    ws.mkdir(mode=0o755)
    set_stop(ws, "audit")
    os.chmod(ws / ".keel", 0o000)
    code = (
        "import sys; from keel.core.stop import stop_set, stop_reason;"
        "print(stop_set(sys.argv[1]), stop_reason(sys.argv[1]) is not None)"
    )
    argv = [str(python), "-S", "-c", code, str(ws)]
    if os.getuid() == 0:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    try:
        env = {"PYTHONPATH": str(workdir / "lib"), "PATH": "/usr/bin:/bin"}
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    finally:
        os.chmod(ws / ".keel", 0o755)
    assert proc.stdout.split() == ["True", "True"], proc.stderr
