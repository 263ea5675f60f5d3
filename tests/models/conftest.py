"""Fixtures of the model tests: a fake API server, a clean model environment, a journal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from model_helpers import MODEL_VARS, OPENED
from model_servers import FakeModelServer

from keel.journal import SQLiteJournal, open_journal


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in MODEL_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while OPENED:
        OPENED.pop().close()


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


@pytest.fixture
def journal(workdir: Path) -> Iterator[SQLiteJournal]:
    opened = open_journal(workdir)
    try:
        yield opened
    finally:
        opened.close()
