"""A pytest plugin for ``make mutate``: mutmut's mutants reach keel's subprocesses too.

keel's tests run ``keel`` as subprocesses (the hook, ``keel policy check``, sandboxed
commands). ``make mutate`` puts ``mutants/src`` on their ``PYTHONPATH``, and mutmut names the
mutant under test in ``MUTANT_UNDER_TEST``, which they inherit, so a subprocess runs the same
mutant as the test that started it. While mutmut collects which tests reach which function
(``stats``), it must not: a subprocess cannot report back, and mutmut's recorder fails outside
the project directory. So in that phase the variable is taken out of the environment;
mutmut's own process still knows the phase (it keeps a process-local copy).

mutmut copies ``tests/`` into ``mutants/`` following symlinks, so a link in a test corpus
(``tests/workspace/patches/err_symlink_*``) would arrive as a plain copy of its target and
the test reading it would fail on every run. The links are put back before the tests run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

_PHASES = frozenset({"stats", "list_all_tests", "mutant_generation"})


def restore_links(original: Path, copy: Path) -> int:
    """Make every symlink under ``original`` a symlink (same target) under ``copy`` too."""
    restored = 0
    for link in sorted(p for p in original.rglob("*") if p.is_symlink()):
        twin = copy / link.relative_to(original)
        if twin.is_symlink() or not twin.parent.is_dir():
            continue
        if twin.is_dir():
            shutil.rmtree(twin)
        elif twin.exists():
            twin.unlink()
        twin.symlink_to(os.readlink(link))
        restored += 1
    return restored


def pytest_configure(config: object) -> None:
    """Hide mutmut's bookkeeping phases from the subprocesses; repair the copied links."""
    if os.environ.get("MUTANT_UNDER_TEST") in _PHASES:
        del os.environ["MUTANT_UNDER_TEST"]
        here = Path.cwd()
        if here.name == "mutants" and (here.parent / "tests").is_dir():
            restore_links(here.parent / "tests", here / "tests")
