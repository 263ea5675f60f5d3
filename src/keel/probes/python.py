"""Python probes: importability in the project's environment, symbols via ``ast``, compilation.

Nothing from the workspace is executed here: ``symbols`` and ``compiles`` only parse, and
``importable`` looks the module up with ``importlib.util.find_spec`` in a child interpreter
(the workspace's ``.venv`` when there is one) that is killed at the probe's timeout.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from keel.probes._fs import ProbeContext, decode_text, read_bytes
from keel.probes._result import Failure

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_FIND = (
    "import importlib.util, sys\n"
    "sys.path[:0] = [p for p in sys.argv[2:]]\n"
    "try:\n"
    "    found = importlib.util.find_spec(sys.argv[1]) is not None\n"
    "except (ImportError, ValueError):\n"
    "    found = False\n"
    "print('yes' if found else 'no')\n"
)


def importable(ctx: ProbeContext, module: str) -> bool:
    """Whether ``module`` can be imported in the project's environment."""
    if not _MODULE.match(module) or len(module) > 200:
        raise Failure("python.bad_module", f"{module!r} is not a module name")
    venv = ctx.workspace / ".venv" / "bin" / "python"
    exe = str(venv) if venv.exists() else sys.executable
    root = str(ctx.workspace)
    try:
        done = subprocess.run(
            [exe, "-I", "-c", _FIND, module, root, str(Path(root) / "src")],
            capture_output=True,
            timeout=max(1.0, ctx.timeout - 0.5),
            stdin=subprocess.DEVNULL,
            cwd=root,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise Failure("python.timeout", f"looking up {module!r} took too long") from exc
    except OSError as exc:
        raise Failure("python.unavailable", f"the interpreter cannot run: {exc.strerror}") from exc
    return done.stdout.strip() == b"yes"


def _source(ctx: ProbeContext, path: str) -> str:
    _, data = read_bytes(ctx, path)
    return decode_text(ctx, data, what=repr(path), utf16=False)


def _parse(source: str, path: str) -> ast.Module:
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise Failure(
            "python.syntax", exc.msg or "invalid syntax", line=exc.lineno, column=exc.offset
        ) from exc
    except (RecursionError, MemoryError) as exc:
        raise Failure("python.too_complex", "the file nests too deeply to parse") from exc
    except ValueError as exc:
        raise Failure("python.invalid", str(exc)) from exc


def symbols(ctx: ProbeContext, path: str) -> dict[str, Any]:
    """Top-level functions, classes (with their methods), assignments and imports of a file."""
    tree = _parse(_source(ctx, path), path)
    functions: list[str] = []
    classes: dict[str, list[str]] = {}
    names: list[str] = []
    imports: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append(node.name)
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = [
                n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.extend(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import):
            imports.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports.append("." * node.level + (node.module or ""))
    return {"functions": functions, "classes": classes, "names": names, "imports": imports}


def compiles(ctx: ProbeContext, path: str) -> bool:
    """Whether a file compiles (it is not run); the error is noted when it does not."""
    source = _source(ctx, path)
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        ctx.note(f"{path}:{exc.lineno}:{exc.offset}: {exc.msg}")
        return False
    except (RecursionError, MemoryError, ValueError) as exc:
        ctx.note(f"{path}: cannot compile: {type(exc).__name__}")
        return False
    return True
