"""The journal on PostgreSQL (``[journal] url``), against a real server the tests start.

The server is ``_support.postgres`` (initdb + pg_ctl of the system's PostgreSQL, as
``nobody`` when run as root, 127.0.0.1 only, password authentication: keel gets the password
from ``PGPASSWORD``); each test gets its own database (``pg_url``). Hooks are real ``keel``
processes (``_support.hook``), decided in process or by a ``keel hookd`` the test starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import test_journal_store as store
import test_journal_transactions as transactions
from journal_helpers import session_events

from _support import hook, keel, keel_env, make_workspace, verdict
from keel.config import JournalConfig
from keel.core.errors import JournalError
from keel.hook import relay
from keel.journal import (
    Journal,
    open_journal,
    read_journal,
)
from keel.journal._open import default_workspace_name
from keel.journal._postgres import PgTarget, PostgresJournal

JournalFactory = Callable[[], Journal]
READ = "Read"


def _toml(url: str, name: str | None = None) -> str:
    extra = f'workspace = "{name}"\n' if name else ""
    return f'[journal]\nurl = "{url}"\n{extra}'


def _workspace(root: Path, url: str, name: str | None = None) -> Path:
    return make_workspace(root, keel_toml=_toml(url, name), files={"a.txt": "hello\n"})


def _read(
    ws: Path, session: str, *, hookd: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A Claude Code ``PreToolUse`` of a Read inside the workspace: allowed, journaled."""
    payload = {"tool_name": READ, "tool_input": {"file_path": str(ws / "a.txt")}}
    return hook(
        "PreToolUse", payload, workspace=ws, session=session, via="launcher", hookd=hookd, env=env
    )


def _reason(done: subprocess.CompletedProcess[str]) -> str:
    """Why a hook denied: Claude's JSON answer, or stderr with exit code 2."""
    if done.returncode == 2:
        return done.stderr
    out = json.loads(done.stdout)["hookSpecificOutput"]
    return str(out.get("permissionDecisionReason", ""))


def _psql_rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        cur = db.execute(sql, params)  # pyright: ignore[reportArgumentType]
        return list(cur.fetchall()) if cur.description is not None else []


@pytest.fixture
def pg_journal(pg_url: str) -> Iterator[JournalFactory]:
    opened: list[PostgresJournal] = []

    def factory() -> Journal:
        name = f"ws-{len(opened)}-{time.monotonic_ns()}"
        journal = PostgresJournal(PgTarget(JournalConfig(url=pg_url), name))
        opened.append(journal)
        return journal

    yield factory
    for journal in opened:
        journal.close()


@pytest.fixture
def hookd() -> Iterator[Callable[[Path], None]]:
    """Start ``keel hookd`` for a workspace (the relayed hooks then go to it); stopped after."""
    started: list[subprocess.Popen[bytes]] = []

    def start(root: Path) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "keel.hook.server", str(root)],
            env=keel_env({"KEEL_HOOKD_IDLE": "120"}, hookd=True),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(proc)
        end = time.monotonic() + 60
        while not relay.read_record(str(root / ".keel")):
            assert proc.poll() is None and time.monotonic() < end, "keel hookd did not start"
            time.sleep(0.02)

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)


# -- the journal protocol, the same tests as on SQLite ----------------------------------------


@pytest.mark.parametrize(
    "check",
    [
        store.test_round_trip_every_payload_shape,
        store.test_seq_is_global_across_sessions_and_filters_work,
        store.test_sessions_summarise_in_first_seen_order,
        transactions.test_append_many_stores_consecutive_chained_seqs,
        transactions.test_a_request_id_is_answered_once,
        transactions.test_session_state_is_versioned,
        transactions.test_unserializable_outcome_or_state_writes_nothing,
        transactions.test_a_deadline_already_passed_is_too_late,
    ],
    ids=lambda f: f.__name__,
)
def test_the_protocol_tests_pass_on_postgres(
    check: Callable[[JournalFactory], None], pg_journal: JournalFactory
) -> None:
    check(pg_journal)


def test_workspaces_in_one_database_have_chains_of_their_own(pg_url: str) -> None:
    settings = JournalConfig(url=pg_url)
    with (
        PostgresJournal(PgTarget(settings, "a")) as a,
        PostgresJournal(PgTarget(settings, "b")) as b,
    ):
        a.append_many(session_events("sa")[:3], request_id="r", session_state=("sa", {"n": 1}))
        b.append_many(session_events("sb")[:2], request_id="r", session_state=("sa", {"n": 2}))
        assert [e.seq for e in a.events()] == [1, 2, 3]
        assert [e.seq for e in b.events()] == [1, 2]
        assert a.answered("r") == {} and b.answered("r") == {}
        assert a.session_state("sa") == (1, {"n": 1}) and b.session_state("sa") == (1, {"n": 2})
        assert a.verify() == [] and b.verify() == []


# -- config and installation ---------------------------------------------------------------


def test_a_password_in_the_url_is_refused_with_the_line_and_key(workdir: Path) -> None:
    ws = make_workspace(
        workdir, keel_toml='[policy]\npreset = "developer"\n\n[journal]\n'
        'url = "postgresql://keel:s3cret@127.0.0.1:5432/keel"\n'
    )  # fmt: skip
    done = keel("log", workspace=ws)
    assert done.returncode != 0
    assert "keel.toml:5" in done.stderr and "journal.url" in done.stderr, done.stderr
    assert "PGPASSWORD" in done.stderr and "s3cret" not in done.stderr


def test_without_psycopg_the_error_names_the_extra(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = _workspace(workdir, "postgresql://keel@127.0.0.1:9/keel")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # an import of it now fails
    with pytest.raises(JournalError) as missing:
        open_journal(ws)
    assert missing.value.code == "journal.postgres_missing"
    assert "keel install postgres" in missing.value.message


# -- many hook processes, two workspaces, one database -----------------------------------------


def test_16_hook_processes_on_two_workspaces_lose_nothing(
    pg_url: str, workdir: Path, hookd: Callable[[Path], None]
) -> None:
    spaces = [_workspace(workdir / name, pg_url) for name in ("one", "two")]
    for ws in spaces:
        hookd(ws)
    # per workspace: 6 hook processes decide in process, 2 relay to its keel hookd
    calls = [(ws, f"s{i}", i >= 6) for ws in spaces for i in range(8)]
    with ThreadPoolExecutor(len(calls)) as pool:
        done = list(pool.map(lambda c: _read(c[0], c[1], hookd=c[2]), calls))
    assert [verdict(d) for d in done] == ["allow"] * 16, [d.stderr[-500:] for d in done]
    names = [default_workspace_name(ws) for ws in spaces]
    assert len(set(names)) == 2
    for ws in spaces:
        with read_journal(ws) as journal:
            events = list(journal.events())
            sessions = {s.session_id: s.events for s in journal.sessions()}
        assert [e.seq for e in events] == list(range(1, 17))  # gap-free, its own chain
        assert sessions == {f"s{i}": 2 for i in range(8)}
        for i in range(8):
            kinds = [e.kind for e in events if e.session_id == f"s{i}"]
            assert kinds == ["tool.call", "decision"]
        report = keel("verify", "--json", workspace=ws)
        assert report.returncode == 0, report.stdout + report.stderr
        assert json.loads(report.stdout)["events"] == 16


def test_two_checkouts_naming_one_workspace_append_to_one_linear_chain(
    pg_url: str, workdir: Path
) -> None:
    """Two checkouts (as on two hosts) with the same ``[journal] workspace``: one chain."""
    spaces = [_workspace(workdir / name, pg_url, name="acme-api") for name in ("x", "y")]
    calls = [(spaces[i % 2], f"t{i}") for i in range(8)]
    with ThreadPoolExecutor(len(calls)) as pool:
        done = list(pool.map(lambda c: _read(c[0], c[1]), calls))
    assert [verdict(d) for d in done] == ["allow"] * 8
    rows = _psql_rows(pg_url, "SELECT seq FROM keel_events WHERE workspace = %s", "acme-api")
    assert sorted(r[0] for r in rows) == list(range(1, 17))
    for ws in spaces:
        assert keel("verify", workspace=ws).returncode == 0


# -- tampering --------------------------------------------------------------------------------


def test_a_row_changed_by_sql_is_caught_by_keel_verify(pg_url: str, workdir: Path) -> None:
    ws = _workspace(workdir, pg_url)
    for i in range(3):
        assert verdict(_read(ws, f"s{i}")) == "allow"
    assert keel("verify", workspace=ws).returncode == 0
    _psql_rows(
        pg_url,
        "UPDATE keel_events SET payload = replace(payload, 'allow', 'deny') "
        "WHERE workspace = %s AND seq = 4 RETURNING seq",
        default_workspace_name(ws),
    )
    done = keel("verify", workspace=ws)
    assert done.returncode == 1
    assert "seq 4: chain.hash_mismatch" in done.stdout, done.stdout


def test_rows_deleted_from_the_end_are_caught_by_the_head_recorded_here(
    pg_url: str, workdir: Path
) -> None:
    ws = _workspace(workdir, pg_url)
    for i in range(3):
        assert verdict(_read(ws, f"s{i}")) == "allow"
    name = default_workspace_name(ws)
    _psql_rows(pg_url, "DELETE FROM keel_events WHERE workspace = %s AND seq > 4", name)
    _psql_rows(
        pg_url,
        "UPDATE keel_workspaces SET seq = 4, hash = "
        "(SELECT hash FROM keel_events WHERE workspace = %s AND seq = 4) WHERE workspace = %s",
        name,
        name,
    )
    done = keel("verify", workspace=ws)
    assert done.returncode == 1 and "head.events_lost" in done.stdout, done.stdout
    # the next writer records the loss in the chain, then goes on
    assert verdict(_read(ws, "after")) == "allow"
    done = keel("verify", workspace=ws)
    assert done.returncode == 1 and "journal.break" in done.stdout, done.stdout
    acknowledged = keel("verify", "--acknowledge", "--reason", "test", workspace=ws)
    assert acknowledged.returncode == 0, acknowledged.stdout + acknowledged.stderr


def test_a_host_with_another_key_refuses_to_append(pg_url: str) -> None:
    target = PgTarget(JournalConfig(url=pg_url), "keyed")
    with PostgresJournal(target, key=b"k" * 32) as journal:
        journal.append(session_events()[0])
    with pytest.raises(JournalError) as refused:
        PostgresJournal(target, key=b"o" * 32)
    assert refused.value.code == "journal.key_mismatch"


# -- failing closed -----------------------------------------------------------------------------


def _count(url: str, name: str) -> int:
    rows = _psql_rows(url, "SELECT count(*) FROM keel_events WHERE workspace = %s", name)
    return int(rows[0][0])


def test_a_connection_killed_mid_transaction_leaves_nothing_and_the_hook_denies(
    pg_url: str, workdir: Path
) -> None:
    import psycopg

    ws = _workspace(workdir, pg_url)
    name = default_workspace_name(ws)
    assert verdict(_read(ws, "s1")) == "allow"  # the session's state row now exists
    before = _count(pg_url, name)
    holder = psycopg.connect(pg_url, autocommit=True)
    with holder, holder.transaction():
        # Hold the session's state row: the hook's transaction locks the head, writes its
        # events and the new head, then waits here, open, for the state row.
        holder.execute(
            "SELECT 1 FROM keel_session_state WHERE workspace = %s AND session_id = %s FOR UPDATE",
            (name, "s1"),
        )
        got: list[subprocess.CompletedProcess[str]] = []
        runner = threading.Thread(target=lambda: got.append(_read(ws, "s1")))
        runner.start()
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            pid = _waiting_backend(watcher, runner)
            watcher.execute("SELECT pg_terminate_backend(%s)", (pid,))
        runner.join(timeout=300)
    assert verdict(got[0]) == "deny"
    assert "journal" in _reason(got[0]), _reason(got[0])
    assert _count(pg_url, name) == before  # no half decision: no event, head, state
    head = "SELECT seq FROM keel_workspaces WHERE workspace = %s"
    assert _psql_rows(pg_url, head, name) == [(before,)]
    state = "SELECT version FROM keel_session_state WHERE workspace = %s"
    assert _psql_rows(pg_url, state, name) == [(1,)]
    assert keel("verify", workspace=ws).returncode == 0
    assert verdict(_read(ws, "s1")) == "allow"  # and the next call is journaled again
    assert _count(pg_url, name) == before + 2


def _waiting_backend(watcher: Any, runner: threading.Thread) -> int:
    """The pid of keel's backend once it waits for a lock (polled; bounded, not timed).

    ``watcher`` is in autocommit: inside a transaction pg_stat_activity would not change.
    """
    end = time.monotonic() + 120
    while time.monotonic() < end and runner.is_alive():
        with watcher.cursor() as cur:
            found = cur.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'keel' "
                "AND wait_event_type = 'Lock'"
            ).fetchall()
        if found:
            return int(found[0][0])
        time.sleep(0.02)
    raise AssertionError("the hook's transaction never waited for the held row")


def test_a_stopped_server_denies_through_hookd_and_a_restart_recovers(
    pg_server: Any, pg_url: str, workdir: Path, hookd: Callable[[Path], None]
) -> None:
    ws = _workspace(workdir, pg_url)
    hookd(ws)
    assert verdict(_read(ws, "s1", hookd=True)) == "allow"  # the daemon holds its connection
    pg_server.stop()
    try:
        down = _read(ws, "s2", hookd=True)
        assert verdict(down) == "deny"
        assert "journal" in _reason(down), _reason(down)
        alone = _read(ws, "s3")  # decided in process: cannot connect at all
        assert verdict(alone) == "deny" and "journal" in _reason(alone), _reason(alone)
    finally:
        pg_server.start()
    assert verdict(_read(ws, "s4", hookd=True)) == "allow"  # the daemon reconnected
    with read_journal(ws) as journal:
        assert {s.session_id for s in journal.sessions()} == {"s1", "s4"}
    assert keel("verify", workspace=ws).returncode == 0


# -- migrate, and the same output on either backend ------------------------------------------


def _outputs(ws: Path) -> dict[str, str]:
    runs = {
        "log": keel("log", workspace=ws),
        "log-json": keel("log", "--json", workspace=ws),
        "log-deny": keel("log", "--decision", "deny,allow", workspace=ws),
        "show": keel("show", "sess-1", workspace=ws),
        "show-full": keel("show", "sess-2", "--full", workspace=ws),
        "show-json": keel("show", "sess-1", "--json", workspace=ws),
        "export": keel("export", workspace=ws),
        "export-otlp": keel("export", "--format", "otlp-json", workspace=ws),
        "verify": keel("verify", "--json", workspace=ws),
    }
    for what, done in runs.items():
        assert done.returncode == 0, (what, done.stdout, done.stderr)
    return {what: done.stdout for what, done in runs.items()}


def test_migrate_copies_the_chain_and_every_command_prints_the_same(
    pg_url: str, workdir: Path
) -> None:
    ws = make_workspace(workdir, files={"a.txt": "hello\n"})
    with open_journal(ws) as journal:  # SQLite: no [journal] yet
        for event in session_events("sess-1") + session_events("sess-2", agent="codex"):
            journal.append_many([event], request_id=f"r{event.span_id}{event.session_id}")
        journal.append_many([], session_state=("sess-1", {"turn": 3}))
    on_sqlite = _outputs(ws)
    done = keel("journal", "migrate", "--to", pg_url, "--json", workspace=ws)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["events"] == 26 and report["last_seq"] == 26
    (ws / "keel.toml").write_text(_toml(pg_url))
    assert _outputs(ws) == on_sqlite
    with read_journal(ws) as journal:
        assert isinstance(journal, PostgresJournal)
        assert journal.session_state("sess-1") == (1, {"turn": 3})
        assert journal.answered(f"r{1:016x}sess-1") == {}
    again = keel("journal", "migrate", "--to", pg_url, workspace=ws)
    assert again.returncode == 1 and "already holds events" in again.stderr
    assert verdict(_read(ws, "after")) == "allow"  # the hooks go on with the copied chain
    assert keel("verify", workspace=ws).returncode == 0


def test_migrate_refuses_a_password_in_the_url(workdir: Path) -> None:
    ws = make_workspace(workdir)
    done = keel("journal", "migrate", "--to", "postgresql://u:pw@127.0.0.1:9/db", workspace=ws)
    assert done.returncode == 2 and "PGPASSWORD" in done.stderr, done.stderr


def test_a_sqlite_workspace_never_imports_psycopg(workdir: Path) -> None:
    ws = make_workspace(workdir, keel_toml='[policy]\npreset = "developer"\n')
    probe = (
        "import sys\nfrom keel.journal import open_journal\n"
        f"open_journal({str(ws)!r}).close()\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.startswith(('psycopg', 'keel.journal._postgres'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stdout
