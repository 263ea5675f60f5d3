"""``make mutate``'s test runner: the forkserver collects once, each mutant's run only runs.

mutmut's forkserver imports the tests once (``forkserver_warmup = "collect"``), then every
mutant's run is a fresh ``pytest.main``: parsing options, loading plugins and conftests and
collecting every file its tests are in again. For a policy mutant that was ~0.45 s of a
~0.5 s run (profiled: a corpus file of a thousand parametrized cases is collected whole to
pick a few of them), and a run has ten thousand mutants.

Here the forkserver builds one pytest session and collects every selected test into it
(what its warm-up did anyway, kept instead of thrown away). Each mutant's run, a fork of it,
gives that session the mutant's tests and runs pytest's own test loop, then ends the session
as ``pytest.main`` would (session finish, unconfigure: fixtures torn down, its base directory
removed). No test has run in the forkserver, so each fork starts from a session no test has
touched. Anything the session cannot serve (a test it did not collect, a warm-up that
failed) falls back to mutmut's ``pytest.main``.
"""

from __future__ import annotations

import os
import shutil
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mutmut.runners.harness import PytestRunner
from mutmut.utils.file_utils import change_cwd

# pytest's exit codes (``pytest.ExitCode``), without importing pytest in mutmut's parent.
OK, TESTS_FAILED, INTERRUPTED, INTERNAL_ERROR = 0, 1, 2, 3


ERRORS = "session-errors.log"  # in mutants/: what ended a mutant's run with an exception
TIMES = "mutant-times.tsv"  # in mutants/: name, seconds, exit code, tests given


def note_time(mutant: str, seconds: float, status: int | str, tests: int) -> None:
    """Append one mutant run's time to ``TIMES`` (mutmut records none for forked runs).

    One short ``O_APPEND`` write per run, so concurrent runs' lines do not interleave. A run
    ended by its time bound writes nothing (mutmut records it as a timeout).
    """
    line = f"{mutant}\t{seconds:.3f}\t{status}\t{tests}\n".encode()
    fd = os.open(TIMES, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


# The tests that failed in one of mutmut's runs without a mutant (the coverage pass, the stats
# run), as ``phase<TAB>node id<TAB>when<TAB>reason`` lines in mutants/ (``mutmut_keel`` notes
# them). Those runs are forked from mutmut's parent while it holds their output
# (``CatchOutput``), so pytest's own report never reached the log: mutmut said only "failed to
# collect stats. runner returned 1". ``scripts/mutmut_run.py`` prints them when the run stops.
UNMUTATED_FAILURES = "unmutated-failures.tsv"


def read_unmutated_failures(mutants: Path) -> list[tuple[str, str, str, str]]:
    """``UNMUTATED_FAILURES`` under ``mutants``: (phase, node id, when, reason) each."""
    try:
        text = (mutants / UNMUTATED_FAILURES).read_text(encoding="utf-8")
    except OSError:
        return []
    found: list[tuple[str, str, str, str]] = []
    for line in text.splitlines():
        parts = line.split("\t", 3)
        if len(parts) == 4:
            found.append((parts[0], parts[1], parts[2], parts[3]))
    return found


REPORTED = 20  # failures listed (the Makefile shows the log's last 40 lines)
_PHASE_NAMES = {"mutant_generation": "the coverage pass", "stats": "mutmut's stats run",
                "list_all_tests": "mutmut's test listing"}  # fmt: skip


def failure_report(mutants: Path) -> str:
    """What ``make mutate`` prints when tests failed without a mutant ("" when none did)."""
    failures = read_unmutated_failures(mutants)
    if not failures:
        return ""
    phases = ", ".join(dict.fromkeys(_PHASE_NAMES.get(f[0], f[0]) for f in failures))
    lines = [
        f"make mutate: {len(failures)} test(s) failed with no mutant under test ({phases});"
        " every selected test must pass or skip before mutants can be judged:"
    ]
    shown = failures[:REPORTED]
    lines += [f"  FAILED {nodeid} ({when}): {reason}" for _, nodeid, when, reason in shown]
    if len(failures) > len(shown):
        lines.append(f"  ... {len(failures) - len(shown)} more in mutants/{UNMUTATED_FAILURES}")
    return "\n".join(lines) + "\n"


EXPLAINED = "tests/mutation-equivalent.tsv"


def explained_mutants(root: Path) -> frozenset[str]:
    """The mutants ``EXPLAINED`` says survive, whose mutated line is still the one explained.

    They are equivalent mutants: no test can kill them, and a surviving policy mutant's run
    is seconds of tests (hundreds of them a run). They count as survivors with their reason,
    as if they had run; ``MUTATE_RECHECK=1`` runs them too. An explanation without its line,
    or written for another mutation of the function, does not count.
    """
    import mutation_score

    path = root / EXPLAINED
    if os.environ.get("MUTATE_RECHECK") or not path.is_file():
        return frozenset()
    known = mutation_score.load_explained(path)
    return frozenset(
        name
        for name, why in known.items()
        if why.line and mutation_score.mutated_line(root, name) == why.line
    )


def note(line: str) -> None:
    """Add ``line`` to ``mutants/phases.log`` (``make mutate`` prints it)."""
    with open("mutants/phases.log", "a", encoding="utf-8") as log:
        log.write(line + "\n")


class SessionRunner(PytestRunner):
    """mutmut's ``PytestRunner``, serving mutant runs from one pre-collected session."""

    def __init__(self) -> None:
        super().__init__()
        self._config: Any = None
        self._session: Any = None
        self._items: dict[str, Any] = {}
        self._explained: frozenset[str] = frozenset()

    def mutant_args(self) -> list[str]:
        """The options of mutmut's run for a mutant (``-x``: it stops at its first failure)."""
        options = self._pytest_args_regular_run(["-"])[:-1]  # mutmut's own, without the test
        return ["--rootdir=.", "--tb=native", *options]

    def warm_up(self) -> None:
        """Configure pytest and collect every selected test, once, in the forkserver."""
        try:
            with change_cwd("mutants"):
                self._collect()
        except Exception as error:  # mutmut's own run per mutant still works
            self._config = self._session = None
            self._items = {}
            note(f"one session: not built ({error!r}); each mutant runs pytest.main")
        else:
            note(f"one session: {len(self._items)} tests collected")
        try:
            self._explained = explained_mutants(Path.cwd())
        except (Exception, SystemExit) as error:  # a malformed file: run them all
            note(f"explained: not read ({error!r}); every mutant runs")
        else:
            note(f"explained: {len(self._explained)} mutants survive without a run")

    def _collect(self) -> None:
        from _pytest.config import _prepareconfig
        from _pytest.main import Session

        args = [*self.mutant_args(), *self._pytest_add_cli_args_test_selection]
        config = _prepareconfig([*args, *self._pytest_add_cli_args], plugins=[])
        config._do_configure()
        session = Session.from_config(config)
        session.exitstatus = OK
        config.hook.pytest_sessionstart(session=session)
        config.hook.pytest_collection(session=session)
        # Capturing starts with the configuration; each fork starts its own.
        capture: Any = config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            capture.stop_global_capturing()
        self._config, self._session = config, session
        self._items = {item.nodeid: item for item in session.items}

    def run_tests(self, *, mutant_name: str | None, tests: Iterable[str]) -> int:
        """Run ``tests`` for ``mutant_name`` in the collected session (a fork of it)."""
        wanted = list(tests)
        if mutant_name in self._explained:
            with change_cwd("mutants"):
                note_time(mutant_name, 0.0, "explained", 0)
            return OK
        if self._session is None or mutant_name is None or not wanted:
            return super().run_tests(mutant_name=mutant_name, tests=wanted)
        import mutmut_keel

        start = time.monotonic()
        with change_cwd("mutants"):
            try:
                chosen = mutmut_keel.prepare(mutant_name, wanted)
                if any(test not in self._items for test in chosen):
                    status = None
                else:
                    status = self._run([self._items[test] for test in chosen])
                    note_time(mutant_name, time.monotonic() - start, status, len(chosen))
            except BaseException:  # mutmut records a worker error; say what it was
                with open(ERRORS, "a", encoding="utf-8") as log:
                    log.write(f"{mutant_name}\n{traceback.format_exc()}\n")
                raise
        if status is None:
            note(f"{mutant_name}: a test not in the session, run by pytest.main")
            return super().run_tests(mutant_name=mutant_name, tests=wanted)
        return status

    def _run(self, items: list[Any]) -> int:
        import mutmut_keel
        from _pytest.main import Failed  # raised by the test loop when -x stops it
        from _pytest.outcomes import Exit

        config, session = self._config, self._session
        factory = getattr(config, "_tmp_path_factory", None)
        if factory is not None:
            factory._given_basetemp = mutmut_keel.basetemp_of(os.getpid())
            factory._basetemp = None
        capture: Any = config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            capture.start_global_capturing()
        session.items = items
        session.testscollected = len(items)
        status = OK
        try:
            config.hook.pytest_runtestloop(session=session)
            status = TESTS_FAILED if session.testsfailed else OK
        except Failed:
            status = TESTS_FAILED
        except (KeyboardInterrupt, Exit):
            status = INTERRUPTED
        except BaseException:
            status = INTERNAL_ERROR
        finally:
            session.exitstatus = status
            try:
                config.hook.pytest_sessionfinish(session=session, exitstatus=status)
            finally:
                status = self._unconfigure(status)
        return status

    def _unconfigure(self, status: int) -> int:
        """End the run's configuration; an error there fails the run.

        A plain pytest run ends the same way (pytest's own unraisable-exception check raises
        at unconfigure, e.g. a ``Popen`` a test left running): ``make test`` would fail, so
        the mutant is killed, not a worker error (which mutmut does not count as killed).
        """
        import mutmut_keel

        try:
            self._config._ensure_unconfigure()
        except Exception:
            with open(ERRORS, "a", encoding="utf-8") as log:
                log.write(f"at unconfigure (the run fails)\n{traceback.format_exc()}\n")
            shutil.rmtree(mutmut_keel.basetemp_of(os.getpid()), ignore_errors=True)
            return INTERNAL_ERROR
        return status
