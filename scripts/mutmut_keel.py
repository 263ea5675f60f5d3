"""A pytest plugin for ``make mutate``: mutmut's mutants reach keel's subprocesses too.

keel's tests run ``keel`` as subprocesses (the hook, ``keel policy check``, sandboxed
commands). ``make mutate`` puts ``mutants/src`` on their ``PYTHONPATH``, and mutmut names the
mutant under test in ``MUTANT_UNDER_TEST``, which they inherit, so a subprocess runs the same
mutant as the test that started it. While mutmut collects which tests reach which function
(``stats``), it must not: a subprocess cannot report back, and mutmut's recorder fails outside
the project directory. So in that phase the variable is taken out of the environment;
mutmut's own process still knows the phase (it keeps a process-local copy).
"""

from __future__ import annotations

import os

_PHASES = frozenset({"stats", "list_all_tests", "mutant_generation"})


def pytest_configure(config: object) -> None:
    """Hide mutmut's bookkeeping phases from the subprocesses the tests start."""
    if os.environ.get("MUTANT_UNDER_TEST") in _PHASES:
        del os.environ["MUTANT_UNDER_TEST"]
