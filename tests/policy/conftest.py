"""The policy tests' shared fixture: ``tree``, a workspace of real links (policy_helpers.Tree)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from policy_helpers import Tree


@pytest.fixture
def tree(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tree]:
    t = Tree(workdir)
    monkeypatch.setenv("HOME", str(t.home))
    monkeypatch.delenv("CDPATH", raising=False)
    yield t
