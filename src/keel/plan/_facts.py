"""Sentences for the evidence report: what a probe found, in words a later step can rely on."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from keel.probes import ProbeResult

MAX_SHOWN = 300


def shown(value: Any) -> str:
    """A value as it reads in a fact (JSON, cut to a few hundred characters)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…"


def _is(yes: str, no: str) -> Callable[[dict[str, Any], Any], str]:
    def say(args: dict[str, Any], value: Any) -> str:
        return f"{args.get('path')} {yes if value else no}"

    return say


_FACTS: dict[str, Callable[[dict[str, Any], Any], str]] = {
    "fs.exists": _is("exists", "does not exist"),
    "fs.is_file": _is("is a regular file", "is not a regular file"),
    "fs.is_dir": _is("is a directory", "is not a directory"),
    "fs.readable": _is("is readable", "is not readable"),
    "fs.writable": _is("is writable", "is not writable"),
    "fs.list_dir": lambda a, v: f"{a.get('path')} contains {shown(v)}",
    "fs.glob": lambda a, v: f"{a.get('pattern')!r} matches {shown(v)}",
    "fs.sha256": lambda a, v: f"{a.get('path')} has SHA-256 {v}",
    "fs.read_text": lambda a, v: f"{a.get('path')} was read ({len(v)} characters)",
    "parse.json": lambda a, v: f"{a.get('path')} is valid JSON{_shape(v)}",
    "parse.yaml": lambda a, v: f"{a.get('path')} is valid YAML{_shape(v)}",
    "parse.toml": lambda a, v: f"{a.get('path')} is valid TOML{_shape(v)}",
    "parse.ini": lambda a, v: f"{a.get('path')} is valid INI with sections {shown(list(v))}",
    "parse.dotenv": lambda a, v: f"{a.get('path')} sets {shown(v.get('keys'))}",
    "parse.csv_headers": lambda a, v: f"{a.get('path')} has columns {shown(v)}",
    "parse.csv_row_count": lambda a, v: f"{a.get('path')} has {v} data rows",
    "parse.csv_sum": lambda a, v: f"column {a.get('column')!r} of {a.get('path')} sums to {v}",
    "git.branch": lambda a, v: f"the git branch is {v!r}" if v else "HEAD is detached or unborn",
    "git.is_clean": lambda a, v: "the work tree is clean" if v else "the work tree has changes",
    "git.tracked": _is("is tracked by git", "is not tracked by git"),
    "python.importable": lambda a, v: f"{a.get('module')!r} is {'' if v else 'not '}importable",
    "python.compiles": _is("compiles", "does not compile"),
    "cmd.which": lambda a, v: f"{a.get('name')} is {f'installed at {v}' if v else 'not installed'}",
    "cmd.version": lambda a, v: f"{a.get('name')} {f'has version {v}' if v else 'has no version'}",
    "env.has": lambda a, v: f"${a.get('name')} is {'' if v else 'not '}set",
}  # fmt: skip


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return f" (an object with keys {shown(list(value))})"
    if isinstance(value, list):
        return f" (an array of {len(value)} items)"
    return f" ({shown(value)})"


def probe_fact(function: str, args: dict[str, Any], result: ProbeResult, var: str) -> str:
    """One sentence for a probe's outcome."""
    if not result.ok:
        subject = args.get("path") or args.get("name") or args.get("url") or function
        message = result.error.describe() if result.error else "failed"
        return f"{function} on {subject}: {message}"
    say = _FACTS.get(function)
    if say is not None:
        try:
            return say(args, result.value)
        except (AttributeError, TypeError):
            pass
    if function == "data.get_nested_value":
        used_default = any("default" in n for n in result.notes)
        if used_default:
            return f"{args.get('path')!r} is not present; the default {shown(result.value)} is used"
        return f"{args.get('path')!r} is {shown(result.value)}"
    return f"{var} = {shown(result.value)}"
