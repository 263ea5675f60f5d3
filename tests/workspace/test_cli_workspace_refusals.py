"""What the workspace commands refuse, run as a user runs them (``keel`` in a directory).

``keel rollback --last`` over your own edits undoes nothing of an agent's: it refuses with
the ``--force`` hint, changing no file and adding no checkpoint, and with nothing changed it
does nothing at all. ``keel checkpoint create`` outside a workspace is an error, as ``keel
stop`` is, and writes nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from _support import keel, make_workspace

TreeReader = Callable[[Path], dict[str, bytes | str]]


def _checkpoints(root: Path) -> list[str]:
    listed = keel("checkpoint", "list", "--json", cwd=root, check=True)
    return [c["short"] for c in json.loads(listed.stdout)["checkpoints"]]


def _everything(top: Path) -> list[tuple[str, bytes | None]]:
    """Every path under ``top`` with the bytes of each file: what "nothing written" compares."""
    found: list[tuple[str, bytes | None]] = []
    for dirpath, dirnames, filenames in os.walk(top):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            content = path.read_bytes() if path.is_file() else None
            found.append((str(path.relative_to(top)), content))
    return sorted(found, key=lambda item: item[0])


def test_rollback_last_over_your_own_edits_refuses_with_the_force_hint(
    workdir: Path, tree: TreeReader
) -> None:
    root = make_workspace(workdir / "ws", files={"app.py": "x = 1\n", "notes.txt": "n\n"}, git=True)
    keel("checkpoint", "create", cwd=root, check=True)
    (root / "app.py").write_text("x = 2  # mine\n")
    (root / "mine.txt").write_bytes(b"\x00 my own file\n")
    before = tree(root)
    made = _checkpoints(root)
    for extra in ([], ["--dry-run"]):
        out = keel("rollback", "--last", *extra, cwd=root)
        assert out.returncode == 1, out.stdout
        assert "nothing to undo" in out.stderr and "Pass --force to reset them" in out.stderr
        assert "app.py, mine.txt" in out.stderr
        assert out.stderr.rstrip().endswith("[workspace.nothing_to_roll_back]")
        assert tree(root) == before
        assert _checkpoints(root) == made
    forced = keel("rollback", "--last", "--force", cwd=root)
    assert forced.returncode == 0, forced.stderr
    assert (root / "app.py").read_text() == "x = 1\n" and not (root / "mine.txt").exists()


def test_a_rollback_with_nothing_changed_does_nothing(workdir: Path) -> None:
    root = make_workspace(workdir / "ws", files={"app.py": "x = 1\n"}, git=True)
    keel("checkpoint", "create", cwd=root, check=True)
    [made] = _checkpoints(root)
    for _ in range(2):
        out = keel("rollback", "--last", cwd=root)
        assert out.returncode == 0, out.stderr
        assert out.stdout == f"nothing changed since checkpoint {made}: nothing to roll back\n"
    data = json.loads(keel("rollback", "--last", "--json", cwd=root, check=True).stdout)
    assert (data["undo"], data["after"], data["restored"]) == (None, None, [])
    assert _checkpoints(root) == [made]


def test_checkpoint_create_outside_a_workspace_is_an_error_and_writes_nothing(
    workdir: Path,
) -> None:
    plain = make_workspace(workdir / "plain", files={"big.bin": "x" * 4096, "docs/a.md": "a\n"})
    make_workspace(plain / "app", keel_toml="")
    before = _everything(workdir)
    out = keel("checkpoint", "create", cwd=plain)
    assert out.returncode == 2, out.stdout
    assert f"{plain} is not a keel workspace" in out.stderr
    assert "workspaces below it: app/. Run `keel checkpoint create` in one of them" in out.stderr
    assert out.stderr.rstrip().endswith("[usage.no_workspace]")
    error = json.loads(keel("checkpoint", "create", "--json", cwd=plain).stderr)["error"]
    assert (error["code"], error["workspaces"]) == ("usage.no_workspace", [str(plain / "app")])
    assert _everything(workdir) == before
    assert out.stdout == ""
