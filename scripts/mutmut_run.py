"""``make mutate``'s mutmut: the mutmut 3.8 CLI, with the type check's errors mapped by ``ast``.

mutmut maps each type error to its mutant by parsing every mutated file with libcst: minutes
on keel's 400,000 lines of mutants (and again in ``scripts/mutmut_typecheck.py`` before this
existed). The errors and their mutants come from ``mutmut_typecheck.caught`` instead, which
finds each function copy with the C parser. Everything else is mutmut's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mutmut
import mutmut.__main__ as mutmut_cli
from mutmut.mutation.file_mutation import FailedTypeCheckMutant, MutatedMethodLocation
from mutmut.type_checking import TypeCheckingError
from mutmut.utils.file_utils import change_cwd
from mutmut.utils.format_utils import get_mutant_name
from mutmut_typecheck import caught

PINNED = "3.8.1"


def caught_by_type_check() -> dict[str, FailedTypeCheckMutant]:
    """Mutmut's ``filter_mutants_with_type_checker``, without libcst."""
    found: dict[str, FailedTypeCheckMutant] = {}
    with change_cwd(Path("mutants")):
        here = Path.cwd()
        for diagnostic, copy in caught():
            path = Path(diagnostic["file"])
            function = f"{copy.base}__mutmut_{copy.suffix}"
            name = get_mutant_name(path.relative_to(here), function)
            error = TypeCheckingError(
                file_path=path,
                line_number=diagnostic["range"]["start"]["line"] + 1,
                error_description=diagnostic["message"],
            )
            where = MutatedMethodLocation(path, function, copy.start, copy.end)
            found[name] = FailedTypeCheckMutant(method_location=where, name=name, error=error)
    return found


def main() -> int:
    """Run mutmut's CLI (``run --max-children N`` ...) with the faster type-check mapping."""
    if mutmut.__version__ != PINNED:
        print(f"scripts/mutmut_run.py is written for mutmut {PINNED}", file=sys.stderr)
        return 2
    mutmut_cli.filter_mutants_with_type_checker = caught_by_type_check
    return mutmut_cli.cli(prog_name="mutmut") or 0


if __name__ == "__main__":
    raise SystemExit(main())
