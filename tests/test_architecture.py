"""The house's shape: no import cycles, and the documented layers are the enforced ones.

import-linter (``make check``, ``[tool.importlinter]`` in pyproject.toml) enforces the layers
between packages; it does not forbid a cycle inside one package. This file computes the
whole import graph of ``src/keel`` from the source (every ``import``, at module level, inside
functions and under ``TYPE_CHECKING`` alike) and fails on any cycle, naming it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def modules(src: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under ``src``: its dotted name -> (file, is a package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


def import_graph(src: Path, root: str) -> dict[str, set[str]]:
    """Module -> the modules of ``root`` it imports, wherever in the file the import is."""
    known = modules(src)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, package) in known.items():
        here = name if package else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                targets.update(f"{base}.{a.name}" for a in node.names)
        deps = {resolve(t) for t in targets if t == root or t.startswith(root + ".")}
        graph[name] = {d for d in deps if d is not None and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_keel_imports_itself_back_even_from_inside_a_function() -> None:
    found = cycles(import_graph(SRC, "keel"))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_sees_a_cycle_through_a_function_local_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from pkg import c\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text("from . import a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.d"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]


def _contract_layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers"]
    return [" | ".join(sorted(p.strip() for p in layer.split("|"))) for layer in layers["layers"]]


def _documented_layers() -> list[str]:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- layers: checked.*?-->\n```text\n(.*?)```", text, re.S)
    assert block, "docs/ARCHITECTURE.md has no layer block (<!-- layers: checked ... -->)"
    rows = [row.split("#")[0].strip() for row in block.group(1).splitlines()]
    return [" | ".join(sorted(p.strip() for p in r.split("|"))) for r in rows if r]


def test_the_layers_in_the_architecture_document_are_the_enforced_ones() -> None:
    assert _documented_layers() == _contract_layers()


def test_every_package_of_keel_sits_in_a_layer() -> None:
    placed = {p.strip() for layer in _contract_layers() for p in layer.split("|")}
    top = {
        ".".join(name.split(".")[:2])
        for name in modules(SRC)
        if name.count(".") >= 1 and not name.startswith("keel.sandbox")
    }
    top |= {
        ".".join(n.split(".")[:3])
        for n in modules(SRC)
        if n.count(".") >= 2 and n.startswith("keel.sandbox.")
    }
    # the package roots and the launcher script sit above every layer by design
    outside = {"keel._launch", "keel.sandbox"}
    assert sorted(top - placed - outside) == []


def test_the_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run(
        [str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in proc.stdout


def test_the_path_of_one_call_is_at_most_eight_files_that_exist() -> None:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## The path of one Claude Code Bash call", 1)[1].split("\n## ", 1)[0]
    files = re.findall(r"^\d+\. \*\*`(src/keel/[\w/]+\.py)`\*\*", section, re.M)
    assert 1 <= len(files) <= 8, files
    assert [f for f in files if not (REPO / f).is_file()] == []
    named = re.findall(r"`((?:core|hook|guard|policy|sandbox|journal)/[\w/]+\.py)`", section)
    assert [f for f in named if not (SRC / "keel" / f).is_file()] == []
