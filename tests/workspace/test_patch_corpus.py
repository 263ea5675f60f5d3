"""The patch corpus: each case under patches/ has a before tree, a patch and an expectation."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from keel.core.errors import PatchError
from keel.journal import MemoryJournal
from keel.workspace.patch import apply_patch

TreeReader = Callable[[Path], dict[str, bytes | str]]

CORPUS = Path(__file__).resolve().parent / "patches"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())


@pytest.mark.parametrize("name", CASES)
def test_corpus_case(tree: TreeReader, name: str, workdir: Path) -> None:
    case = CORPUS / name
    root = workdir / "ws"
    shutil.copytree(case / "before", root, symlinks=True)
    expect = json.loads((case / "expect.json").read_text())
    text = (case / "patch").read_bytes().decode("utf-8", "surrogateescape")
    before = tree(root)
    journal = MemoryJournal()
    if expect["ok"]:
        result = apply_patch(root, text, journal=journal, session_id="s1", tool_use_id="t1")
        assert result.applied
        assert tree(root) == tree(case / "after")
        [event] = list(journal.events())
        assert event.kind == "patch"
        assert event.payload.detail["ok"] is True
        assert set(event.payload.files) == set(result.paths)
    else:
        with pytest.raises(PatchError) as info:
            apply_patch(root, text, journal=journal, session_id="s1")
        assert info.value.code == expect["error"], info.value.message
        if "message_contains" in expect:
            assert expect["message_contains"] in info.value.message
        assert tree(root) == before
        leftovers = [p for p in root.rglob("*") if ".keel-" in p.name]
        assert leftovers == []
        [event] = list(journal.events())
        assert event.payload.detail["ok"] is False
        assert event.payload.detail["code"] == expect["error"]


def test_corpus_is_not_empty() -> None:
    assert len([c for c in CASES if c.startswith("err_")]) >= 15
    assert len([c for c in CASES if not c.startswith("err_")]) >= 15


@pytest.mark.parametrize("name", [c for c in CASES if not c.startswith("err_")])
def test_check_mode_writes_nothing(tree: TreeReader, name: str, workdir: Path) -> None:
    case = CORPUS / name
    root = workdir / "ws"
    shutil.copytree(case / "before", root, symlinks=True)
    before = tree(root)
    text = (case / "patch").read_bytes().decode("utf-8", "surrogateescape")
    result = apply_patch(root, text, check=True)
    assert not result.applied
    assert tree(root) == before
