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


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A real PostgreSQL server for this test process (``_support.postgres``), stopped after.

    Skips (fails under KEEL_REQUIRE_ALL=1) when PostgreSQL or psycopg is not installed.
    """
    from _support import skip_or_fail
    from _support.postgres import postgres_bin, start_server

    if postgres_bin() is None:
        skip_or_fail("PostgreSQL is not installed (apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        skip_or_fail("psycopg is not installed (pip install -e '.[postgres]')")
    server = start_server()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def pg_url(pg_server: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    """A fresh database in ``pg_server`` for this test; PGPASSWORD set to log in to it."""
    import re
    import uuid

    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40] + "_" + uuid.uuid4().hex[:8]
    for key, value in pg_server.env().items():
        monkeypatch.setenv(key, value)
    return pg_server.create_database(name)
