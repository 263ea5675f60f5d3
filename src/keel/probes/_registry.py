"""The registry of probes: names, aliases, typed parameters, result types, where each runs.

A probe is a read-only function ``fn(ctx, **args) -> JSON value``. Its module is imported only
when it is called, so the sandboxed runner loads just what one probe needs. Names are keel's
own (``fs.exists``, ``parse.yaml``) with aliases for the seed article's vocabulary
(``filesystem.check_exists``, ``parsing.safe_load_yaml``); :func:`resolve` accepts both.

``where`` is ``sandbox`` for probes that read the workspace or run programs, ``host`` for the
few that must see the host: pure data functions over earlier results, the environment (the
sandbox's is empty), http (the sandbox has no network) and ``fs.writable`` (the sandbox's
read-only view cannot say whether keel may write).

Standard library only: the sandboxed runner imports this.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from keel.core.errors import BindError

ParamType = Literal["path", "str", "int", "number", "bool", "any", "object", "list", "url"]
ValueType = Literal["bool", "str", "str?", "int", "number", "list", "object", "object?", "any"]
Where = Literal["sandbox", "host"]


@dataclass(frozen=True, slots=True)
class Param:
    """One typed parameter of a probe or action."""

    name: str
    type: ParamType
    required: bool = True
    default: Any = None


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    """A registered probe."""

    name: str
    target: str
    """``module:function`` of the implementation, imported on first call."""
    params: tuple[Param, ...]
    returns: ValueType
    where: Where
    summary: str
    aliases: tuple[str, ...] = ()
    reads_column: bool = False
    """Reads a CSV column named by its ``column`` argument (the commitment lint checks headers)."""

    def load(self) -> Callable[..., Any]:
        """The implementation."""
        module, _, function = self.target.partition(":")
        return getattr(importlib.import_module(module), function)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description, for ``keel plan functions`` and the schema docs."""
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "params": [
                {"name": p.name, "type": p.type, "required": p.required, "default": p.default}
                for p in self.params
            ],
            "returns": self.returns,
            "where": self.where,
            "summary": self.summary,
        }


def _p(name: str, type_: ParamType = "path", default: Any = ..., /) -> Param:
    return Param(name, type_, default is ..., None if default is ... else default)


_PATH = (_p("path"),)
_OBJ = (_p("obj", "any"),)

PROBES: tuple[ProbeSpec, ...] = (
    ProbeSpec("fs.exists", "keel.probes.fs:exists", _PATH, "bool", "sandbox",
              "whether a path exists",
              ("filesystem.check_exists", "filesystem.exists", "check_file", "check_file_exists")),
    ProbeSpec("fs.is_file", "keel.probes.fs:is_file", _PATH, "bool", "sandbox",
              "whether a path is a regular file", ("filesystem.is_file", "filesystem.check_file")),
    ProbeSpec("fs.is_dir", "keel.probes.fs:is_dir", _PATH, "bool", "sandbox",
              "whether a path is a directory", ("filesystem.is_dir",)),
    ProbeSpec("fs.list_dir", "keel.probes.fs:list_dir", (_p("path", "path", "."),), "list",
              "sandbox", "the names in a directory", ("filesystem.list_dir", "list_dir")),
    ProbeSpec("fs.stat", "keel.probes.fs:stat_path", _PATH, "object?", "sandbox",
              "type, size, mode and mtime of a path", ("filesystem.stat",)),
    ProbeSpec("fs.readable", "keel.probes.fs:readable", _PATH, "bool", "sandbox",
              "whether a file can be read", ("filesystem.check_readable", "filesystem.readable")),
    ProbeSpec("fs.writable", "keel.probes.fs:writable", _PATH, "bool", "host",
              "whether keel could write a file (nothing is written)",
              ("filesystem.check_writable", "filesystem.check_file_writable",
               "filesystem.writable", "check_file_writable")),
    ProbeSpec("fs.glob", "keel.probes.fs:glob", (_p("pattern", "str"),), "list", "sandbox",
              "workspace paths matching a glob", ("filesystem.glob",)),
    ProbeSpec("fs.read_text", "keel.probes.fs:read_text",
              (_p("path"), _p("max_bytes", "int", None)), "str", "sandbox",
              "the text of a file, size-capped", ("filesystem.read_text", "filesystem.read_file")),
    ProbeSpec("fs.sha256", "keel.probes.fs:sha256", _PATH, "str", "sandbox",
              "the SHA-256 of a file", ("filesystem.sha256",)),
    ProbeSpec("parse.json", "keel.probes.parsing:load_json", _PATH, "any", "sandbox",
              "a JSON file, strictly parsed", ("parsing.safe_load_json", "parsing.load_json")),
    ProbeSpec("parse.yaml", "keel.probes.parsing:load_yaml", _PATH, "any", "sandbox",
              "a YAML file, safely parsed", ("parsing.safe_load_yaml", "parsing.load_yaml")),
    ProbeSpec("parse.toml", "keel.probes.parsing:load_toml", _PATH, "object", "sandbox",
              "a TOML file", ("parsing.safe_load_toml", "parsing.load_toml")),
    ProbeSpec("parse.ini", "keel.probes.parsing:load_ini", _PATH, "object", "sandbox",
              "an INI file", ("parsing.safe_load_ini", "parsing.load_ini")),
    ProbeSpec("parse.dotenv", "keel.probes.parsing:load_dotenv",
              (_p("path"), _p("values", "bool", False)), "object", "sandbox",
              "the keys a .env file sets (never a secret file's values)", ("parsing.load_dotenv",)),
    ProbeSpec("parse.csv_headers", "keel.probes.parsing:csv_headers", _PATH, "list", "sandbox",
              "the column names of a CSV file",
              ("parsing.inspect_csv_headers", "inspect_csv_headers", "parsing.csv_columns")),
    ProbeSpec("parse.csv_sample", "keel.probes.parsing:csv_sample",
              (_p("path"), _p("rows", "int", 5)), "list", "sandbox",
              "the first rows of a CSV file", ("parsing.csv_sample_rows",)),
    ProbeSpec("parse.csv_row_count", "keel.probes.parsing:csv_row_count", _PATH, "int",
              "sandbox", "the number of data rows of a CSV file", ()),
    ProbeSpec("parse.csv_sum", "keel.probes.parsing:csv_sum", (_p("path"), _p("column", "str")),
              "number", "sandbox", "the sum of a numeric CSV column",
              ("parsing.csv_column_sum", "data.csv_column_sum"), reads_column=True),
    ProbeSpec("parse.encoding", "keel.probes.parsing:encoding", _PATH, "object", "sandbox",
              "encoding, BOM, NUL bytes and line endings of a file",
              ("parsing.detect_encoding",)),
    ProbeSpec("data.get_nested_value", "keel.probes.data:get_nested_value",
              (_p("obj", "any"), _p("path", "any"), _p("default", "any", None)), "any", "host",
              "the value at a dotted path, or a default", ("data.get",)),
    ProbeSpec("data.keys", "keel.probes.data:keys", _OBJ, "list", "host",
              "the keys of an object", ()),
    ProbeSpec("data.type_of", "keel.probes.data:type_of", _OBJ, "str", "host",
              "the JSON type of a value", ("data.type",)),
    ProbeSpec("data.length", "keel.probes.data:length", _OBJ, "int", "host",
              "the length of a string, array or object", ("data.len",)),
    ProbeSpec("data.value", "keel.probes.data:value", _OBJ, "any", "host",
              "a constant or template, bound to a variable", ("data.set", "data.constant")),
    ProbeSpec("env.get", "keel.probes.env:get", (_p("name", "str"), _p("default", "any", None)),
              "str?", "host", "whether a variable is set (values redacted; switches as is)",
              ("environment.get", "env.get_var")),
    ProbeSpec("env.has", "keel.probes.env:has", (_p("name", "str"),), "bool", "host",
              "whether an environment variable is set", ("environment.has",)),
    ProbeSpec("git.branch", "keel.probes.git:branch", (), "str?", "sandbox",
              "the current git branch", ()),
    ProbeSpec("git.is_clean", "keel.probes.git:is_clean", (), "bool", "sandbox",
              "whether the work tree has no changes", ()),
    ProbeSpec("git.tracked", "keel.probes.git:tracked", _PATH, "bool", "sandbox",
              "whether a path is tracked", ("git.is_tracked",)),
    ProbeSpec("git.changed_files", "keel.probes.git:changed_files", (), "list", "sandbox",
              "paths with changes", ()),
    ProbeSpec("python.importable", "keel.probes.python:importable", (_p("module", "str"),),
              "bool", "sandbox", "whether a module can be imported", ("python.can_import",)),
    ProbeSpec("python.symbols", "keel.probes.python:symbols", _PATH, "object", "sandbox",
              "functions, classes and names defined in a file", ("python.inspect_symbols",)),
    ProbeSpec("python.compiles", "keel.probes.python:compiles", _PATH, "bool", "sandbox",
              "whether a file compiles", ("python.check_syntax",)),
    ProbeSpec("cmd.which", "keel.probes.cmd:which", (_p("name", "str"),), "str?", "sandbox",
              "the path of an installed program", ("command.which", "shell.which")),
    ProbeSpec("cmd.version", "keel.probes.cmd:version", (_p("name", "str"),), "str?", "sandbox",
              "the version of an installed program", ("command.version",)),
    ProbeSpec("http.head", "keel.probes.http:head", (_p("url", "url"),), "object", "host",
              "HEAD an allowlisted URL", ("network.head",)),
    ProbeSpec("http.get", "keel.probes.http:get", (_p("url", "url"),), "object", "host",
              "GET an allowlisted URL", ("network.http_get", "http_get")),
)  # fmt: skip

_PREFIXES = {"filesystem.": "fs.", "parsing.": "parse.", "file.": "fs."}
_BY_NAME: dict[str, ProbeSpec] = {}
for _spec in PROBES:
    _BY_NAME[_spec.name] = _spec
    for _alias in _spec.aliases:
        _BY_NAME[_alias] = _spec


def resolve(name: str) -> ProbeSpec | None:
    """The probe called ``name`` (a keel name, an alias, or ``filesystem.X``/``parsing.X``)."""
    spec = _BY_NAME.get(name)
    if spec is None:
        for prefix, ours in _PREFIXES.items():
            if name.startswith(prefix):
                spec = _BY_NAME.get(ours + name[len(prefix) :])
                break
    return spec


def all_names() -> list[str]:
    """Every accepted probe name and alias."""
    return sorted(_BY_NAME)


def bind(
    params: Sequence[Param], args: Sequence[Any] | Mapping[str, Any], function: str
) -> dict[str, Any]:
    """Positional or named ``args`` matched to ``params`` (count and names, not types)."""
    names = [p.name for p in params]
    required = [p.name for p in params if p.required]
    if isinstance(args, Mapping):
        unknown = [k for k in args if k not in names]
        if unknown:
            raise BindError("arg_name", f"{function} has no parameter {unknown[0]!r}", unknown[0])
        bound = dict(args)
    else:
        if len(args) > len(params):
            raise BindError(
                "arg_count",
                f"{function} takes at most {len(params)} argument(s), got {len(args)}",
                len(params),
            )
        bound = dict(zip(names, args, strict=False))
    missing = [n for n in required if n not in bound]
    if missing:
        raise BindError(
            "arg_count", f"{function} needs argument {missing[0]!r} ({len(required)} required)"
        )
    for p in params:
        bound.setdefault(p.name, p.default)
    return bound


def type_ok(type_: ParamType, value: Any) -> bool:
    """Whether a concrete ``value`` fits a parameter type."""
    match type_:
        case "path" | "url":
            return isinstance(value, str) and bool(value) and "\x00" not in value
        case "str":
            return isinstance(value, str)
        case "int":
            return isinstance(value, int) and not isinstance(value, bool)
        case "number":
            return (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
            )
        case "bool":
            return isinstance(value, bool)
        case "object":
            return isinstance(value, dict)
        case "list":
            return isinstance(value, list)
        case "any":
            return True


def check_types(params: Sequence[Param], bound: Mapping[str, Any], function: str) -> None:
    """Raise ``BindError`` for the first argument whose value does not fit its type."""
    for p in params:
        value = bound.get(p.name)
        if value is None and not p.required:
            continue
        if not type_ok(p.type, value):
            raise BindError(
                "arg_type",
                f"{function}: argument {p.name!r} must be {p.type}, got {type(value).__name__}",
                p.name,
            )
