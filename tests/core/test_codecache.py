"""keel's code cache (``keel.core.codecache``), by effect, in real interpreters: a module is
served from the file only while its source is the one cached; a stale, damaged, foreign or
shared file is never run; a fork that closed its descriptors still imports; the one-shot
``keel exec`` process collects no garbage until its command runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import keel
from keel.core.codecache import cache_path

KEEL_ROOT = str(Path(keel.__file__).parent.parent)

_RUN = """
import json, os, sys
sys.path[:0] = [{keel_root!r}, {root!r}]
from keel.core import codecache
cache = codecache.install("t", {state!r}, root={root!r}, package="kcpkg")
if {close_fds!r}:
    os.closerange(3, 1024)  # as keel exec's detached journal does
import kcpkg.mod
out = {{
    "value": kcpkg.mod.VALUE,
    "served": type(kcpkg.mod.__spec__.loader).__name__ == "_Loader",
    "package_served": type(kcpkg.__spec__.loader).__name__ == "_Loader",
    "file": kcpkg.mod.__file__,
}}
codecache.save()
print(json.dumps(out))
"""


def _package(tmp_path: Path, value: str = "one") -> Path:
    root = tmp_path / "src"
    (root / "kcpkg").mkdir(parents=True, exist_ok=True)
    (root / "kcpkg" / "__init__.py").write_text('"""A package."""\n')
    _edit(root, value)
    return root


def _edit(root: Path, value: str) -> None:
    mod = root / "kcpkg" / "mod.py"
    before = mod.stat().st_mtime_ns if mod.exists() else 0
    mod.write_text(f"VALUE = {value!r}\n")
    while mod.stat().st_mtime_ns == before:  # a coarse clock: make the edit visible
        time.sleep(0.01)
        mod.write_text(f"VALUE = {value!r}\n")


def _run(root: Path, state: Path, close_fds: bool = False) -> dict[str, object]:
    code = _RUN.format(keel_root=KEEL_ROOT, root=str(root), state=str(state), close_fds=close_fds)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_a_second_process_is_served_from_the_file(tmp_path: Path) -> None:
    root, state = _package(tmp_path), tmp_path / "state"
    first = _run(root, state)
    path = Path(cache_path("t", str(state)))
    second = _run(root, state)
    assert (first["value"], first["served"]) == ("one", False)  # nothing cached yet
    assert path.stat().st_mode & 0o777 == 0o600
    assert second == {
        "value": "one",
        "served": True,
        "package_served": True,
        "file": str(root / "kcpkg" / "mod.py"),
    }


def test_an_edited_source_is_imported_not_the_cached_code(tmp_path: Path) -> None:
    root, state = _package(tmp_path), tmp_path / "state"
    _run(root, state)
    _edit(root, "two, longer")
    edited = _run(root, state)
    again = _run(root, state)  # the file was rewritten with the new code
    _edit(root, "TWO, LONGER")  # the same size as before: the mtime still tells
    same_size = _run(root, state)  # imported as usual (Python's own .pyc may be stale here)
    after = _run(root, state)  # cached anew: from the source, never from that .pyc
    assert (edited["value"], edited["served"]) == ("two, longer", False)
    assert (again["value"], again["served"]) == ("two, longer", True)
    assert same_size["served"] is False
    assert (after["value"], after["served"]) == ("TWO, LONGER", True)


def test_a_damaged_file_is_ignored_and_written_again(tmp_path: Path) -> None:
    root, state = _package(tmp_path), tmp_path / "state"
    _run(root, state)
    path = Path(cache_path("t", str(state)))
    path.write_bytes(path.read_bytes()[:40])  # cut inside the index
    path.chmod(0o600)
    cut = _run(root, state)
    repaired = _run(root, state)
    assert (cut["value"], cut["served"]) == ("one", False)
    assert (repaired["value"], repaired["served"]) == ("one", True)


def test_a_file_others_may_write_or_of_another_user_is_never_run(tmp_path: Path) -> None:
    root, state = _package(tmp_path), tmp_path / "state"
    _run(root, state)
    path = Path(cache_path("t", str(state)))
    path.chmod(0o620)  # group-writable: someone else could have put code there
    shared = _run(root, state)
    assert (shared["value"], shared["served"]) == ("one", False)
    if os.geteuid() == 0:
        _run(root, state)  # rewritten, this user's alone again
        os.chown(path, 65534, 65534)
        foreign = _run(root, state)
        assert (foreign["value"], foreign["served"]) == ("one", False)


def test_another_installation_is_not_served_from_this_ones_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    one = _package(tmp_path / "a")
    other = _package(tmp_path / "b", "other")
    _run(one, state)
    moved = _run(other, state)  # the same entry's file, another package root
    assert (moved["value"], moved["served"]) == ("other", False)
    assert moved["file"] == str(other / "kcpkg" / "mod.py")


def test_a_fork_that_closed_its_descriptors_still_imports(tmp_path: Path) -> None:
    root, state = _package(tmp_path), tmp_path / "state"
    _run(root, state)
    closed = _run(root, state, close_fds=True)
    assert closed["value"] == "one"  # from the source: the file's descriptor is gone


_ONE_SHOT = """
import gc, json, sys
sys.path.insert(0, {keel_root!r})
from keel.core import isolated
before = gc.isenabled()
isolated.start_one_shot("exec")
held = gc.isenabled()
isolated.resume_collection()
frozen = gc.get_freeze_count() > 0
print(json.dumps([before, held, gc.isenabled(), frozen]))
"""


def test_the_one_shot_process_collects_again_once_its_command_runs(tmp_path: Path) -> None:
    code = _ONE_SHOT.format(keel_root=KEEL_ROOT)
    env = {**os.environ, "KEEL_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], env=env, capture_output=True, text=True
    )
    assert json.loads(done.stdout) == [True, False, True, True], done.stderr


def test_collection_is_left_alone_where_it_was_never_held() -> None:
    import gc

    from keel.core.isolated import resume_collection

    was = gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        for state in (gc.disable, gc.enable):  # another one-shot's choice, or the default
            state()
            expected = gc.isenabled()
            resume_collection()
            assert gc.isenabled() is expected and gc.get_freeze_count() == frozen
    finally:
        (gc.enable if was else gc.disable)()
