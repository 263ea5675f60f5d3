from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from keel.cli.journal import register
from keel.journal import Journal, MemoryJournal, open_journal


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture(params=["sqlite", "memory"])
def make_journal(request: pytest.FixtureRequest, root: Path) -> Iterator[Callable[[], Journal]]:
    opened: list[Journal] = []

    def factory() -> Journal:
        journal: Journal = open_journal(root) if request.param == "sqlite" else MemoryJournal()
        opened.append(journal)
        return journal

    yield factory
    for journal in opened:
        journal.close()


@pytest.fixture
def cli() -> Callable[..., Any]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    register(app)
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, list(args))

    return invoke
