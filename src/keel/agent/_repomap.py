"""The repository map: the workspace's definitions, ranked by how much the code refers to them.

In the manner of Aider's repo map: tree-sitter tag queries find each file's definitions and
references; files are the nodes of a graph with an edge from a file that uses a name to each
file that defines it; PageRank, personalised towards the files and names the task mentions,
ranks the files; each file's rank is shared among the definitions it points at, and the map
lists the best definitions, grouped by file, within a token budget.

Tags are cached per file by modification time and size in ``.keel/cache/repomap.json``, so a
warm map re-parses only what changed. Languages with a grammar here: Python
(``tree-sitter-python``) and shell (``tree-sitter-bash``); other text files are listed by name
only. Everything is deterministic: ties break on the path and the name.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from keel.core.root import GIT_MARKER, STATE_DIR, state_dir
from keel.models import CHARS_PER_TOKEN

CACHE_NAME = "repomap.json"
CACHE_FORMAT = 1
MAX_FILE_BYTES = 256_000
MAX_FILES = 20_000
SKIP_DIRS = frozenset(
    {
        GIT_MARKER,
        STATE_DIR,
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".tox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "dist",
        "build",
        ".clients",
    }
)
LANGUAGES = {".py": "python", ".pyi": "python", ".sh": "bash", ".bash": "bash"}
LINE_CHARS = 100


@dataclass(frozen=True, slots=True)
class Tag:
    """A definition or a reference of ``name`` at ``line`` (1-based) in a file."""

    name: str
    kind: str
    """``def`` or ``ref``."""
    line: int
    text: str
    """The definition's first line, stripped (empty for references)."""


@dataclass(frozen=True, slots=True)
class RepoMap:
    """A rendered map and what building it took."""

    text: str
    files: int
    """Files looked at."""
    parsed: int
    """Files parsed now (the rest came from the cache)."""
    definitions: int


class _Grammar:
    """A language's parser and tags query (built once per process)."""

    def __init__(self, language: Any, query_text: str) -> None:
        import tree_sitter as ts

        self.language = ts.Language(language)
        self.parser = ts.Parser(self.language)
        self.query = ts.Query(self.language, query_text)

    def tags(self, source: bytes) -> list[Tag]:
        import tree_sitter as ts

        tree = self.parser.parse(source)
        lines = source.split(b"\n")
        out: list[Tag] = []
        for _, captures in ts.QueryCursor(self.query).matches(tree.root_node):
            names = captures.get("name") or []
            kind = next((k for k in captures if k.startswith(("definition.", "reference."))), "")
            if not names or not kind:
                continue
            node = names[0]
            row = node.start_point[0]
            name = (node.text or b"").decode("utf-8", "replace")
            if kind.startswith("definition."):
                text = lines[row].decode("utf-8", "replace").strip()[:LINE_CHARS]
                out.append(Tag(name, "def", row + 1, text))
            else:
                out.append(Tag(name, "ref", row + 1, ""))
        return out


@cache
def grammar(language: str) -> _Grammar | None:
    """The grammar for ``language``, or None when its package is not installed."""
    try:
        if language == "python":
            import tree_sitter_python as tsp

            return _Grammar(tsp.language(), tsp.TAGS_QUERY)
        if language == "bash":
            import tree_sitter_bash as tsb

            query = (resources.files("keel.agent") / "queries" / "bash-tags.scm").read_text()
            return _Grammar(tsb.language(), query)
    except ImportError:
        return None
    return None


def walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Workspace files as ``(relative path, stat)``, sorted, skipping tool and hidden dirs."""
    count = 0
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not os.path.isfile(path) or os.path.islink(path) or st.st_size > MAX_FILE_BYTES:
                continue
            yield os.path.relpath(path, root), st
            count += 1
            if count >= MAX_FILES:
                return


class TagCache:
    """Per-file tags keyed by path, modification time and size, kept as JSON under .keel/."""

    def __init__(self, root: Path, *, persist: bool = True) -> None:
        """Load the cache of ``root`` (an unreadable cache is an empty one)."""
        self.path = state_dir(root) / "cache" / CACHE_NAME
        self.persist = persist
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        if persist:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                if data.get("format") == CACHE_FORMAT:
                    self.entries = dict(data.get("files") or {})
            except (OSError, ValueError, AttributeError):
                pass

    def get(self, rel: str, st: os.stat_result) -> list[Tag] | None:
        """The cached tags of ``rel`` if it has not changed since."""
        entry = self.entries.get(rel)
        if entry is None or entry[0] != st.st_mtime_ns or entry[1] != st.st_size:
            return None
        return [Tag(*t) for t in entry[2]]

    def put(self, rel: str, st: os.stat_result, tags: list[Tag]) -> None:
        """Remember ``rel``'s tags."""
        rows = [[t.name, t.kind, t.line, t.text] for t in tags]
        self.entries[rel] = [st.st_mtime_ns, st.st_size, rows]
        self.dirty = True

    def save(self, seen: Iterable[str]) -> None:
        """Write the cache, keeping only files that still exist (best effort)."""
        keep = set(seen)
        if not self.persist or not (self.dirty or keep != set(self.entries)):
            return
        data = {
            "format": CACHE_FORMAT,
            "files": {k: self.entries[k] for k in sorted(keep) if k in self.entries},
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass


def collect(root: Path, cache_: TagCache) -> tuple[dict[str, list[Tag] | None], int]:
    """Every file's tags (None: no grammar for it) and how many were parsed now."""
    found: dict[str, list[Tag] | None] = {}
    parsed = 0
    for rel, st in walk(root):
        language = LANGUAGES.get(os.path.splitext(rel)[1])
        parser = grammar(language) if language else None
        if parser is None:
            found[rel] = None
            continue
        tags = cache_.get(rel, st)
        if tags is None:
            try:
                source = (root / rel).read_bytes()
            except OSError:
                continue
            tags = parser.tags(source)
            cache_.put(rel, st, tags)
            parsed += 1
        found[rel] = tags
    cache_.save(found)
    return found, parsed


def pagerank(
    edges: dict[tuple[str, str], float],
    nodes: list[str],
    personal: dict[str, float],
    *,
    damping: float = 0.85,
    rounds: int = 100,
    tolerance: float = 1e-6,
) -> dict[str, float]:
    """PageRank by power iteration over weighted ``edges`` (source, target) -> weight."""
    if not nodes:
        return {}
    total = sum(personal.values())
    uniform = 1.0 / len(nodes)
    base = {n: (personal.get(n, 0.0) / total if total else uniform) for n in nodes}
    out_weight: dict[str, float] = defaultdict(float)
    for (src, _), weight in edges.items():
        out_weight[src] += weight
    links = [(src, dst, weight / out_weight[src]) for (src, dst), weight in edges.items()]
    sinks = [n for n in nodes if out_weight[n] == 0]
    rank = dict.fromkeys(nodes, uniform)
    for _ in range(rounds):
        spread = (1 - damping) + damping * sum(rank[n] for n in sinks)
        new = {n: spread * base[n] for n in nodes}
        for src, dst, share in links:
            new[dst] += damping * rank[src] * share
        delta = sum(abs(new[n] - rank[n]) for n in nodes)
        rank = new
        if delta < tolerance:
            break
    return rank


def rank_definitions(
    tags: dict[str, list[Tag] | None], mentioned: frozenset[str]
) -> list[tuple[float, str, Tag]]:
    """Definitions by rank, best first, as ``(rank, file, tag)``."""
    defines: dict[str, set[str]] = defaultdict(set)
    references: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for rel, items in tags.items():
        for tag in items or ():
            if tag.kind == "def":
                defines[tag.name].add(rel)
            else:
                references[tag.name][rel] += 1
    named: dict[tuple[str, str, str], float] = {}
    for name, users in references.items():
        definers = defines.get(name)
        if not definers:
            continue
        weight = _weight(name, mentioned, len(definers))
        for user, count in users.items():
            for definer in definers:
                if definer != user:  # a file's own uses say nothing of it to the others
                    named[(user, definer, name)] = weight * math.sqrt(count)
    edges: dict[tuple[str, str], float] = defaultdict(float)
    out_total: dict[str, float] = defaultdict(float)
    for (src, dst, _), weight in named.items():
        edges[(src, dst)] += weight
        out_total[src] += weight
    nodes = sorted(rel for rel, items in tags.items() if items is not None)
    personal = {rel: 1.0 for rel in nodes if _mentions(rel, mentioned)}
    ranks = pagerank(edges, nodes, personal)
    share: dict[tuple[str, str], float] = defaultdict(float)
    for (src, dst, name), weight in named.items():
        share[(dst, name)] += ranks[src] * weight / out_total[src]
    ranked: list[tuple[float, str, Tag]] = []
    for rel in nodes:
        for tag in tags[rel] or ():
            if tag.kind == "def":
                score = share.get((rel, tag.name), 0.0) + ranks.get(rel, 0.0) * 1e-3
                if tag.name in mentioned:
                    score *= 10
                ranked.append((score, rel, tag))
    ranked.sort(key=lambda item: (-item[0], item[1], item[2].line))
    return ranked


def _weight(name: str, mentioned: frozenset[str], definers: int) -> float:
    weight = 1.0
    if name in mentioned:
        weight *= 10
    if name.startswith("_"):
        weight *= 0.1
    if definers > 5:
        weight *= 0.1
    return weight


def _mentions(rel: str, mentioned: frozenset[str]) -> bool:
    stem = os.path.splitext(os.path.basename(rel))[0]
    return rel in mentioned or stem in mentioned


def words_of(text: str) -> frozenset[str]:
    """Identifiers and paths a text names (split on whitespace and punctuation, no regex)."""
    words: set[str] = set()
    for raw in text.split():
        word = raw.strip("`'\"()[]{}<>,;:!?")
        if word:
            words.add(word)
            words.update(p for p in word.replace("/", ".").split(".") if p)
    return frozenset(words)


def render(ranked: list[tuple[float, str, Tag]], plain: list[str], budget_chars: int) -> str:
    """The map text: ranked definitions grouped by file, then other files, within budget."""
    by_file: dict[str, list[Tag]] = {}
    used = 0
    for _, rel, tag in ranked:
        cost = len(_line(tag)) + (0 if rel in by_file else len(rel) + 2)
        if used + cost > budget_chars:
            break
        by_file.setdefault(rel, []).append(tag)
        used += cost
    parts: list[str] = []
    for rel, items in by_file.items():
        parts.append(f"{rel}:\n")
        parts.extend(_line(tag) for tag in sorted(items, key=lambda t: t.line))
    for rel in plain:
        if rel in by_file:
            continue
        if used + len(rel) + 1 > budget_chars:
            break
        parts.append(f"{rel}\n")
        used += len(rel) + 1
    return "".join(parts)


def _line(tag: Tag) -> str:
    return f"  {tag.line}: {tag.text}\n"


def build_map(root: Path, task: str, budget_tokens: int, *, persist: bool = True) -> RepoMap:
    """The repository map of ``root`` for ``task``, at most ``budget_tokens`` (estimated)."""
    tags, parsed = collect(root, TagCache(root, persist=persist))
    ranked = rank_definitions(tags, words_of(task))
    text = render(ranked, sorted(tags), budget_tokens * CHARS_PER_TOKEN) if budget_tokens else ""
    return RepoMap(text, len(tags), parsed, len(ranked))
