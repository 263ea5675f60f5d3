"""Repository map: files per second, cold and warm, on keel's own tree and a 5,000-file repo.

Method: ``keel.agent.build_map`` (tree-sitter tags, the reference graph, PageRank, rendering
within a 1,500-token budget). Cold: the tag cache (``.keel/cache/repomap.json``) is removed
before each round and the grammars are already loaded (one warm-up); warm: the cache is
there and no file changed. Files per second = files with a grammar (Python, shell) / wall
time of the whole map. The generated repo has 5,000 Python modules of ~40 lines, each
defining two functions and a class and calling functions of five other modules. Reference:
Aider's published repo-map speed, about 190 files per second cold.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from keel.agent import build_map
from keel.agent._repomap import LANGUAGES, walk
from keel.core.root import state_dir

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
GENERATED = int(os.environ.get("BENCH_FILES", "5000"))


def generate(root: Path, count: int) -> None:
    """``count`` Python modules that call each other."""
    for n in range(count):
        folder = root / f"pkg{n // 100}"
        folder.mkdir(exist_ok=True)
        calls = "\n".join(f"    total += helper_{(n * 7 + k) % count}(x)" for k in range(1, 6))
        (folder / f"mod{n}.py").write_text(
            f'"""Module {n}."""\n\n\nclass Thing{n}:\n    """A thing."""\n\n'
            f"    def size(self):\n        return {n}\n\n\n"
            f"def helper_{n}(x):\n    return x + {n}\n\n\n"
            f"def work_{n}(x):\n    total = 0\n{calls}\n    return total\n" + "\n# filler\n" * 12
        )


def grammar_files(root: Path) -> int:
    return sum(1 for rel, _ in walk(root) if os.path.splitext(rel)[1] in LANGUAGES)


def measure(root: Path) -> dict[str, float]:
    cache = state_dir(root) / "cache" / "repomap.json"
    build_map(root, "warm up", 1500, persist=False)  # grammars loaded, files in the OS cache
    files = grammar_files(root)
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(ROUNDS):
        cache.unlink(missing_ok=True)
        started = time.perf_counter()
        build_map(root, "make the report faster", 1500)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        build_map(root, "make the report faster", 1500)
        warm.append(time.perf_counter() - started)
    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    return {
        "files": files,
        "cold_s": round(cold_s, 3),
        "warm_s": round(warm_s, 3),
        "cold_files_per_s": round(files / cold_s),
        "warm_files_per_s": round(files / warm_s),
    }


def main() -> None:
    keel_tree = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        own = Path(tmp) / "keel"
        shutil.copytree(keel_tree / "src", own / "src")
        shutil.copytree(keel_tree / "tests", own / "tests")
        results = {"keel": measure(own)}
        generated = Path(tmp) / "generated"
        generated.mkdir()
        generate(generated, GENERATED)
        results[f"generated-{GENERATED}"] = measure(generated)
    json.dump(results, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
