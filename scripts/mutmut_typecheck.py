"""``make mutate``'s type check (mutmut's ``type_check_command``): pyright on the mutants.

keel's CI runs pyright, so a mutant pyright rejects could never land: mutmut counts it as
caught and runs no test for it. Run from ``mutants/``; prints pyright's JSON report with only
the errors the mutation itself made:

- an error outside a mutant's copy of a function is dropped (mutmut would stop on it);
- an error the unmutated copy (``__mutmut_orig``) has too, at the same place in the function,
  is dropped. Every copy of a method sits in the class, so a mutant that assigns ``None`` to
  an attribute widens that attribute's type for every other copy; such an error is not the
  other copies' doing, and counting it would be a false kill.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

MARK = "__mutmut_"


@dataclass(frozen=True)
class Copy:
    """One copy of a function in a mutated file: the original or a mutant."""

    base: str
    suffix: str
    start: int
    end: int


def copies(source: str) -> list[Copy]:
    """Every function copy mutmut wrote into ``source``, with its 1-based line span.

    ``ast`` (C parser): libcst, which mutmut uses, takes minutes on the 20,000-line files.
    """
    found: list[Copy] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            base, mark, suffix = node.name.rpartition(MARK)
            if mark:
                found.append(Copy(base, suffix, node.lineno, node.end_lineno or node.lineno))
    return sorted(found, key=lambda c: c.start)


def _key(diagnostic: dict, copy: Copy) -> tuple[str, int]:
    return diagnostic["message"], diagnostic["range"]["start"]["line"] + 1 - copy.start


def own_errors(diagnostics: list[dict], spans: list[Copy]) -> list[dict]:
    """The diagnostics of one file that a mutant caused itself (see the module docstring)."""
    placed: list[tuple[dict, Copy]] = []
    for diagnostic in diagnostics:
        line = diagnostic["range"]["start"]["line"] + 1
        copy = next((c for c in spans if c.start <= line <= c.end), None)
        if copy is not None:
            placed.append((diagnostic, copy))
    baseline: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for diagnostic, copy in placed:
        if copy.suffix == "orig":
            baseline[copy.base].add(_key(diagnostic, copy))
    return [d for d, c in placed if c.suffix != "orig" and _key(d, c) not in baseline[c.base]]


def mutated_files(pyproject: Path) -> list[str]:
    """``[tool.mutmut] only_mutate`` of ``pyproject``."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return list(data["tool"]["mutmut"]["only_mutate"])


def pyright_threads() -> list[str]:
    """The ``--threads`` option with a count for pyright: one thread per core.

    A bare ``--threads`` means one thread on a machine with fewer than 4 cores (pyright's CLI
    rule). On the 2-core machine, 2 threads checked the 19 mutated files in 160 s instead of
    252 s, with the same diagnostics (measured on one run's mutants, one after the other).
    """
    return ["--threads", str(max(1, os.cpu_count() or 1))]


def pyright_command(venv: Path) -> list[str]:
    """Pyright, niced: it runs beside mutmut's stats run, which must wait for both.

    The stats run is one pytest process (one core) and pyright has a thread per core: at
    equal priority they slow each other down (stats 151 s instead of 92 s). Niced, pyright
    takes the core the stats run leaves, then both once it is done.
    """
    nice = shutil.which("nice")
    command = [str(venv / "bin" / "pyright"), "--outputjson", *pyright_threads()]
    return [nice, "-n", "10", *command] if nice else command


def run_pyright(files: list[str], venv: Path, mutants: Path) -> list[dict]:
    """Pyright's diagnostics for ``files`` (relative to ``mutants``), imports from ``venv``."""
    config = {
        "include": files,
        "pythonVersion": "3.11",
        "typeCheckingMode": "standard",
        "venvPath": str(venv.parent),
        "venv": venv.name,
    }
    (mutants / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    # Its own process group, so that ``stop_pyright`` ends node too (the ``pyright`` wrapper
    # starts it as a child of its own).
    with subprocess.Popen(
        pyright_command(venv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=mutants,
        start_new_session=True,
    ) as process:
        _running.append(process)
        try:
            out, _ = process.communicate()
        finally:
            _running.remove(process)
    report = json.loads(out)
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


_running: list[subprocess.Popen[str]] = []


def stop_pyright() -> None:
    """End every pyright this process started that still runs, node included.

    mutmut ends its run with ``exit(1)`` when a step fails (the stats run), while pyright is
    still checking the mutants in a thread beside it: pyright went on for minutes after
    ``make mutate`` had failed.
    """
    for process in list(_running):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def caught(mutants: Path | None = None) -> list[tuple[dict, Copy]]:
    """Each error a mutation made, with the mutant copy it is in.

    ``mutants``: the ``mutants/`` directory (default: the cwd, as mutmut runs this script).
    No ``chdir``: ``make mutate`` runs this beside mutmut's stats run.
    """
    mutants = (mutants or Path.cwd()).absolute()
    root = mutants.parent
    files = mutated_files(root / "pyproject.toml")
    by_file: dict[str, list[dict]] = defaultdict(list)
    for diagnostic in run_pyright(files, root / ".venv", mutants):
        by_file[diagnostic["file"]].append(diagnostic)
    found: list[tuple[dict, Copy]] = []
    for path, diagnostics in sorted(by_file.items()):
        spans = copies(Path(path).read_text(encoding="utf-8"))
        for diagnostic in own_errors(diagnostics, spans):
            line = diagnostic["range"]["start"]["line"] + 1
            found.append((diagnostic, next(c for c in spans if c.start <= line <= c.end)))
    return found


def main() -> int:
    """Print the filtered report as pyright's JSON; mutmut maps each error to its mutant."""
    json.dump({"generalDiagnostics": [d for d, _ in caught()]}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
