"""Trees to patch, Codex patches and the failure check shared by the patch engine's tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from keel.core.errors import PatchError
from keel.core.events import CheckpointPayload, Event
from keel.journal import MemoryJournal
from keel.workspace.patch import apply_patch

Files = dict[str, bytes | str]


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str, int]]:
    """Everything under root: kind, content (or link target) and mode."""
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        st = path.lstat()
        if path.is_symlink():
            out[rel] = ("link", str(path.readlink()), 0)
        elif path.is_dir():
            out[rel] = ("dir", "", st.st_mode & 0o7777)
        else:
            out[rel] = ("file", path.read_bytes(), st.st_mode & 0o7777)
    return out


def make_files(root: Path, files: Mapping[str, bytes | str]) -> None:
    """Write ``files`` under root: text or bytes, ``"-> target"`` a symlink, ``"<dir>"`` a dir."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and content.startswith("-> "):
            path.symlink_to(content[3:])
        elif isinstance(content, str) and content == "<dir>":
            path.mkdir()
        else:
            path.write_bytes(content.encode() if isinstance(content, str) else content)


def codex_patch(*body: str) -> str:
    """A Codex patch of these lines."""
    return "\n".join(("*** Begin Patch", *body, "*** End Patch")) + "\n"


def payload(event: Event) -> CheckpointPayload:
    """The payload of a journaled patch event."""
    assert isinstance(event.payload, CheckpointPayload)
    return event.payload


def fails(root: Path, files: Files, text: str, **kw: Any) -> PatchError:
    """Apply ``text`` to ``files``; it must fail and leave the tree exactly as it was."""
    make_files(root, files)
    before = snapshot(root)
    journal = MemoryJournal()
    with pytest.raises(PatchError) as info:
        apply_patch(root, text, journal=journal, **kw)
    assert snapshot(root) == before
    [event] = list(journal.events())
    assert payload(event).detail == {"ok": False, **info.value.to_dict()}
    return info.value
