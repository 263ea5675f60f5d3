"""The guard tests' shared fixture: ``guard``, opened on the test's workspace, closed after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from guard_helpers import open_guard

from keel.guard import Guard


@pytest.fixture
def guard(workdir: Path) -> Iterator[Guard]:
    g = open_guard(workdir)
    try:
        yield g
    finally:
        g.close()
