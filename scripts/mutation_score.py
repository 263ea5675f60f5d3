"""Print the score of the last ``mutmut run`` (``make mutate``), and list its survivors.

Reads mutmut 3's per-file results (``mutants/**/*.py.meta``). A mutant counts as killed when a
test failed on it, it timed out, or the type checker caught it (mutmut's own reading);
skipped mutants are left out. The last line is exactly ``mutation score: K/N killed (P%)``.
``--survivors FILE`` writes every mutant that was not killed, one ``name<TAB>status`` a line,
for tests/MUTATION.md. ``--by-module`` adds one score line per mutated module (mutants not
checked yet, as in a run stopped or limited to some modules, are left out of those).

``--report tests/MUTATION.md --explained tests/mutation-equivalent.tsv`` rewrites the block
between ``<!-- mutation report -->`` and ``<!-- end mutation report -->`` in the report: the
score, the score per module, and every survivor with its reason from the explained file
(``name<TAB>mutated line<TAB>reason`` a line, written by hand after reading ``mutmut show
name``). A survivor with no reason there, or whose mutated line is no longer the recorded one
(its function changed, so mutmut numbered its mutants anew), is listed as **not explained**:
kill it with a test or explain it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mutmut_typecheck import copies  # scripts/: one reading of a mutated file

KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout",
          152: "timeout", 37: "caught by type check"}  # fmt: skip
# 255 is mutmut's worker catching an exception from the test run (pytest could not even
# start: a bad test id, a broken plugin). mutmut calls it a timeout; it kills nothing here.
OTHER = {0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 35: "suspicious",
         2: "interrupted", None: "not checked", -11: "segfault", -9: "segfault",
         255: "worker error"}  # fmt: skip


def status(code: int | None) -> str:
    """The name mutmut gives an exit code (``suspicious`` for one it does not know)."""
    return KILLED.get(code) or OTHER.get(code, "suspicious")  # type: ignore[arg-type]


def results(root: Path) -> dict[str, int | None]:
    """Every mutant's exit code, by mutant name, from ``root``/mutants."""
    out: dict[str, int | None] = {}
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        out.update(data.get("exit_code_by_key", {}))
    return out


def module_of(mutant: str) -> str:
    """``keel.policy._paths`` of ``keel.policy._paths.x_inside__mutmut_3`` (or a method's)."""
    head, _, _ = mutant.partition("__mutmut_")
    return head.rpartition(".")[0]


def by_module(codes: dict[str, int | None]) -> list[str]:
    """One ``module: K/N killed (P%)`` line per module, over the mutants that were checked."""
    killed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for name, code in codes.items():
        if code is None or status(code) == "skipped":
            continue
        total[module_of(name)] += 1
        killed[module_of(name)] += code in KILLED
    return [
        f"  {m}: {killed[m]}/{total[m]} killed ({100.0 * killed[m] / total[m]:.1f}%)"
        for m in sorted(total)
    ]


BEGIN = "<!-- mutation report -->"
END = "<!-- end mutation report -->"


@dataclass(frozen=True)
class Explained:
    """Why a mutant survives, and the line it mutates (to notice when it no longer does)."""

    reason: str
    line: str = ""


def load_explained(path: Path) -> dict[str, Explained]:
    """``name -> Explained`` from ``name<TAB>mutated line<TAB>reason`` lines.

    ``#`` lines and blanks are skipped; the mutated line may be empty (not checked).
    """
    out: dict[str, Explained] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not fields[0].strip() or not fields[2].strip():
            raise SystemExit(
                f"{path}:{number}: expected 'name<TAB>mutated line<TAB>reason', got {line!r}"
            )
        out[fields[0].strip()] = Explained(fields[2].strip(), fields[1].strip())
    return out


@cache
def _mutated_file(path: Path) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """A mutated module's lines, and the line span of each function copy by its name."""
    source = path.read_text(encoding="utf-8")
    spans = {f"{c.base}__mutmut_{c.suffix}": (c.start, c.end) for c in copies(source)}
    return source.splitlines(), spans


def mutated_line(root: Path, name: str) -> str:
    """The first line of mutant ``name`` that differs from the original, stripped ("" if none).

    Read from ``root``/mutants/src, where mutmut writes every mutant as a copy of its function
    (``x_f__mutmut_3`` beside ``x_f__mutmut_orig``).
    """
    module, _, function = name.rpartition(".x")
    path = root / "mutants" / "src" / (module.replace(".", "/") + ".py")
    if not path.is_file():
        path = path.with_suffix("") / "__init__.py"
    lines, spans = _mutated_file(path)
    mine = "x" + function
    orig = mine.rpartition("__mutmut_")[0] + "__mutmut_orig"
    if mine not in spans or orig not in spans:
        return ""
    (a0, a1), (b0, b1) = spans[orig], spans[mine]
    if lines[b0 - 1].replace(mine, orig) != lines[a0 - 1]:  # a default in the ``def`` line
        return lines[b0 - 1].replace(mine, orig).strip()
    for old, new in zip(lines[a0:a1], lines[b0:b1], strict=False):
        if old != new:
            return new.strip()
    if a1 - a0 > b1 - b0:  # the mutant removed the original's last lines
        return "- " + lines[a0 + b1 - b0].strip()
    return ""


def report_block(
    codes: dict[str, int | None], explained: dict[str, Explained], root: Path | None = None
) -> str:
    """The generated part of tests/MUTATION.md (see the module docstring).

    With ``root``, an explanation whose recorded line is not the mutant's line any more (the
    function changed and mutmut numbered its mutants anew) is reported as stale.
    """
    counted = {k: c for k, c in codes.items() if status(c) != "skipped"}
    killed = sum(1 for c in counted.values() if c in KILLED)
    caught = sum(1 for c in counted.values() if c == 37)
    unchecked = sum(1 for c in counted.values() if c is None)
    survivors = sorted(k for k, c in counted.items() if c not in KILLED and c is not None)
    reasons: dict[str, str] = {}
    for name in survivors:
        known = explained.get(name)
        now = mutated_line(root, name) if root and known and known.line else ""
        if known is None:
            continue
        if known.line and now and now != known.line:
            continue  # stale: written for another mutation of this function
        reasons[name] = known.reason
    missing = [k for k in survivors if k not in reasons]
    percent = 100.0 * killed / len(counted) if counted else 0.0
    lines = [
        BEGIN,
        "",
        f"mutation score: {killed}/{len(counted)} killed ({percent:.1f}%)",
        "",
    ]
    if unchecked:
        checked = len(counted) - unchecked
        lines += [
            f"**The run stopped with {unchecked} mutants not checked** (counted as not killed "
            f"above). Over the {checked} checked: {killed}/{checked} killed "
            f"({100.0 * killed / checked:.1f}%). `make mutate` resumes where it stopped.",
            "",
        ]
    lines += [
        f"- caught by the type check (pyright): {caught}; killed by a test or a timeout: "
        f"{killed - caught}; not killed: {len(survivors)}, of which explained: "
        f"{len(survivors) - len(missing)}, **not explained: {len(missing)}**.",
        "",
        "| module | killed / mutants |",
        "|---|---|",
    ]
    lines += [f"| {line.strip().replace(': ', ' | ', 1)} |" for line in by_module(counted)]
    lines += ["", "### Survivors", ""]
    for name in survivors:
        why = reasons.get(name, "**not explained**")
        lines.append(f"- `{name}` ({status(counted[name])}): {why}")
    lines += ["", END]
    return "\n".join(lines)


def write_report(path: Path, block: str) -> None:
    """Replace the generated block of ``path`` (or append one) with ``block``."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        head, tail = text.rstrip("\n") + "\n\n", "\n"
    path.write_text(head + block + tail, encoding="utf-8")


def merge_killers(kills: list[str], seed: list[str], live: set[str], top: int = 5) -> list[str]:
    """The killer seed (``function<TAB>test`` lines) after a run.

    Per function, the ``top`` tests that killed most of its mutants in this run (``kills``,
    one line per kill); a function this run killed nothing of keeps its old lines while it
    still has mutants (``live``).
    """
    counts: dict[str, Counter[str]] = {}
    for line in kills:
        function, tab, test = line.partition("\t")
        if tab:
            counts.setdefault(function, Counter())[test] += 1
    out = [f"{f}\t{t}" for f in sorted(counts) for t, _ in counts[f].most_common(top)]
    kept = [
        line
        for line in seed
        if "\t" in line and (f := line.partition("\t")[0]) not in counts and f in live
    ]
    return sorted(out + kept, key=lambda line: line.partition("\t")[0])


def write_killers(root: Path, path: Path) -> None:
    """Merge ``root``/mutants/kills.tsv into the killer seed at ``path`` (``merge_killers``)."""
    try:
        kills = (root / "mutants" / "kills.tsv").read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    seed = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    live = {name.rpartition("__mutmut_")[0] for name in results(root)}
    lines = merge_killers(kills, seed, live)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Print the per-status counts, then the score line; 1 when there are no results."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--survivors", type=Path, help="write the mutants not killed here")
    parser.add_argument("--by-module", action="store_true", help="a score line per module")
    parser.add_argument("--report", type=Path, help="rewrite the generated block of this file")
    parser.add_argument("--explained", type=Path, help="name<TAB>reason of equivalent mutants")
    parser.add_argument("--killers", type=Path, help="merge this run's killers into this seed")
    args = parser.parse_args(argv)
    codes = results(args.root)
    if not codes:
        print("no mutmut results under mutants/: run `make mutate` first", file=sys.stderr)
        return 1
    by_status = Counter(status(c) for c in codes.values())
    for name, count in sorted(by_status.items()):
        print(f"  {name}: {count}")
    total = sum(n for s, n in by_status.items() if s != "skipped")
    killed = sum(1 for c in codes.values() if c in KILLED)
    if args.survivors:
        lines = [f"{k}\t{status(c)}" for k, c in sorted(codes.items()) if c not in KILLED]
        args.survivors.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    if args.by_module:
        print("\n".join(by_module(codes)))
    if args.report:
        explained = load_explained(args.explained) if args.explained else {}
        write_report(args.report, report_block(codes, explained, args.root))
    if args.killers:
        write_killers(args.root, args.killers)
    percent = 100.0 * killed / total if total else 0.0
    print(f"mutation score: {killed}/{total} killed ({percent:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
