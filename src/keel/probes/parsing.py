"""Parsing probes: JSON, YAML, TOML, INI, dotenv, CSV and encodings, each hardened.

A parse failure is a structured ``Failure`` (code, message, line and column where known), never
an exception escaping the probe. Hostile input is bounded: files are capped by size, nesting by
depth, YAML aliases by count and by the size the document expands to, JSON NaN/Infinity and
out-of-range numbers are rejected, and CSV BOMs, NUL bytes and ragged rows are reported.
"""

from __future__ import annotations

import configparser
import csv
import datetime as dt
import io
import json
import math
import re
from typing import Any

from keel.probes._fs import ProbeContext, decode_text, read_bytes, sniff_bom
from keel.probes._result import Failure

MAX_DEPTH = 200
MAX_NODES = 200_000
MAX_YAML_ALIASES = 1000
MAX_SAMPLE_ROWS = 1000


# -- values -------------------------------------------------------------------------------


def to_json_value(value: Any, *, what: str = "document") -> Any:
    """A JSON-ready copy: bounded depth and size; dates as ISO text; non-finite floats as text."""
    budget = [MAX_NODES]
    return _convert(value, 0, budget, what)


def _convert(value: Any, depth: int, budget: list[int], what: str) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise Failure("parse.too_large", f"the {what} expands to more than {MAX_NODES} values")
    if depth > MAX_DEPTH:
        raise Failure("parse.too_deep", f"the {what} nests deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {_key(k): _convert(v, depth + 1, budget, what) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [_convert(v, depth + 1, budget, what) for v in items]
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return json.dumps(key)
    return str(key)


# -- JSON ---------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise Failure("json.non_finite", f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Failure("json.number_range", f"the number {text[:40]} is out of range")
    return value


def parse_json_text(text: str) -> Any:
    """Strict JSON: no NaN/Infinity, finite numbers, bounded depth; errors are failures."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except Failure:
        raise
    except json.JSONDecodeError as exc:
        raise Failure("json.syntax", exc.msg, line=exc.lineno, column=exc.colno) from exc
    except RecursionError as exc:
        raise Failure("json.too_deep", "the document nests too deeply") from exc
    except ValueError as exc:
        raise Failure("json.number_range", f"a number is out of range: {exc}") from exc
    return to_json_value(value)


def load_json(ctx: ProbeContext, path: str) -> Any:
    """Parse a JSON file."""
    _, data = read_bytes(ctx, path)
    return parse_json_text(decode_text(ctx, data, what=repr(path), utf16=False))


# -- YAML ---------------------------------------------------------------------------------


def parse_yaml_text(text: str) -> Any:
    """Safe YAML (one document): no object construction, aliases counted, expansion bounded."""
    import yaml

    class _Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    raise Failure("yaml.aliases", f"more than {MAX_YAML_ALIASES} aliases")
            return super().compose_node(parent, index)

    loader = _Loader(text)
    try:
        value = loader.get_single_data()
    except Failure:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise Failure(
            "yaml.syntax",
            message,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from exc
    except yaml.YAMLError as exc:
        raise Failure("yaml.syntax", str(exc)) from exc
    except RecursionError as exc:
        raise Failure("yaml.too_deep", "the document nests too deeply") from exc
    except (ValueError, TypeError, OverflowError) as exc:
        raise Failure("yaml.value", f"a value cannot be read: {exc}") from exc
    finally:
        loader.dispose()
    return to_json_value(value)


def load_yaml(ctx: ProbeContext, path: str) -> Any:
    """Parse a YAML file safely."""
    _, data = read_bytes(ctx, path)
    return parse_yaml_text(decode_text(ctx, data, what=repr(path)))


# -- TOML ---------------------------------------------------------------------------------

_TOML_WHERE = re.compile(r"\(at line (\d+), column (\d+)\)")


def parse_toml_text(text: str) -> dict[str, Any]:
    """TOML 1.0 through ``tomllib``; errors carry line and column."""
    import tomllib

    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        where = _TOML_WHERE.search(message)
        raise Failure(
            "toml.syntax",
            _TOML_WHERE.sub("", message).strip(),
            line=int(where.group(1)) if where else None,
            column=int(where.group(2)) if where else None,
        ) from exc
    except RecursionError as exc:
        raise Failure("toml.too_deep", "the document nests too deeply") from exc
    except ValueError as exc:
        raise Failure("toml.value", f"a value cannot be read: {exc}") from exc
    return to_json_value(value)


def load_toml(ctx: ProbeContext, path: str) -> dict[str, Any]:
    """Parse a TOML file."""
    _, data = read_bytes(ctx, path)
    return parse_toml_text(decode_text(ctx, data, what=repr(path), utf16=False))


# -- INI and dotenv ------------------------------------------------------------------------


def load_ini(ctx: ProbeContext, path: str) -> dict[str, dict[str, str]]:
    """Parse an INI file: sections of keys, no interpolation."""
    _, data = read_bytes(ctx, path)
    text = decode_text(ctx, data, what=repr(path))
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    try:
        parser.read_string(text, source=path)
    except configparser.MissingSectionHeaderError as exc:
        raise Failure(
            "ini.no_section", "the file has no [section] header", line=exc.lineno
        ) from exc
    except configparser.ParsingError as exc:
        line = exc.errors[0][0] if exc.errors else None
        raise Failure("ini.syntax", f"cannot parse {len(exc.errors)} line(s)", line=line) from exc
    except (configparser.DuplicateSectionError, configparser.DuplicateOptionError) as exc:
        raise Failure("ini.duplicate", exc.message, line=exc.lineno) from exc
    except configparser.Error as exc:
        raise Failure("ini.syntax", str(exc)) from exc
    return {name: dict(parser.items(name, raw=True)) for name in parser.sections()}


_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*?)\s*$")


def load_dotenv(ctx: ProbeContext, path: str, values: bool = False) -> dict[str, Any]:
    """The keys a ``.env`` file sets; never the values of a secrets file.

    Key names are not secrets, so a ``.env`` is read for them; its values are never returned
    (``values=true`` on a file matching the secret globs is ``dotenv.values_refused``). The
    values of a file that is not a secret (``.env.example``, ``config.env``) are returned with
    ``values=true``.
    """
    from keel.probes._fs import contain, secret_glob

    secret = secret_glob(ctx, path, contain(ctx, path)) if isinstance(path, str) else None
    if values and secret is not None:
        raise Failure(
            "dotenv.values_refused",
            f"{path!r} holds secrets ({secret!r}): only its keys are returned, never its values",
        )
    _, data = read_bytes(ctx, path, secrets=True)
    text = decode_text(ctx, data, what=repr(path))
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _DOTENV_LINE.match(line)
        if not match:
            raise Failure("dotenv.syntax", "expected KEY=VALUE", line=number, column=1)
        found[match.group(1)] = _dotenv_value(match.group(2))
    if secret is not None:
        ctx.note(f"{path!r} holds secrets: its keys are listed, its values never")
    return {"keys": sorted(found), "values": found if values else None}


def _dotenv_value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    return raw.split(" #", 1)[0].strip()


# -- CSV ----------------------------------------------------------------------------------


def _csv_rows(ctx: ProbeContext, path: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV file; BOMs, NUL bytes, blank and ragged rows are noted."""
    _, data = read_bytes(ctx, path)
    text = decode_text(ctx, data, what=repr(path))
    if "\x00" in text:
        ctx.note(f"{path!r} contains {text.count(chr(0))} NUL bytes")
    delimiter = _sniff_delimiter(text)
    if delimiter != ",":
        ctx.note(f"{path!r} uses {delimiter!r} as its delimiter")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows: list[list[str]] = []
    try:
        for row in reader:
            rows.append(row)
    except csv.Error as exc:
        raise Failure("csv.syntax", str(exc), line=reader.line_num) from exc
    except MemoryError as exc:  # pragma: no cover - guarded by the size cap
        raise Failure("csv.too_large", "the file is too large to parse") from exc
    if not rows or not rows[0]:
        raise Failure("csv.empty", f"{path!r} has no header row")
    header, body = rows[0], [r for r in rows[1:] if r]
    if len(body) != len(rows) - 1:
        ctx.note(f"{path!r} has {len(rows) - 1 - len(body)} blank line(s)")
    if len(set(header)) != len(header):
        ctx.note(f"{path!r} has duplicate column names")
    ragged = [i + 2 for i, r in enumerate(rows[1:]) if r and len(r) != len(header)]
    if ragged:
        shown = ", ".join(str(n) for n in ragged[:5])
        ctx.note(
            f"{path!r} has {len(ragged)} ragged row(s) (field count differs from the header's "
            f"{len(header)}): row(s) {shown}{'…' if len(ragged) > 5 else ''}"
        )
    return header, body


def _sniff_delimiter(text: str) -> str:
    """The delimiter that splits the first record most: comma, semicolon, tab or pipe."""
    first = text.split("\n", 1)[0]
    unquoted = re.sub(r'"[^"]*"', "", first)
    counts = {d: unquoted.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > 0 else ","


def csv_headers(ctx: ProbeContext, path: str) -> list[str]:
    """The column names of a CSV file."""
    header, _ = _csv_rows(ctx, path)
    return header


def csv_sample(ctx: ProbeContext, path: str, rows: int = 5) -> list[dict[str, Any]]:
    """The first ``rows`` data rows as objects keyed by column (extra fields under ``_extra``)."""
    header, body = _csv_rows(ctx, path)
    count = max(0, min(rows, MAX_SAMPLE_ROWS))
    return [_row_object(header, row) for row in body[:count]]


def _row_object(header: list[str], row: list[str]) -> dict[str, Any]:
    obj: dict[str, Any] = {
        name: (row[i] if i < len(row) else None) for i, name in enumerate(header)
    }
    if len(row) > len(header):
        obj["_extra"] = row[len(header) :]
    return obj


def csv_row_count(ctx: ProbeContext, path: str) -> int:
    """The number of data rows (without the header and blank lines)."""
    _, body = _csv_rows(ctx, path)
    return len(body)


def csv_sum(ctx: ProbeContext, path: str, column: str) -> int | float:
    """The sum of a numeric column; cells that are not numbers are skipped and noted."""
    header, body = _csv_rows(ctx, path)
    if column not in header:
        raise Failure("csv.no_column", f"column {column!r} is not among {header}")
    index = header.index(column)
    numbers: list[int | float] = []
    skipped = 0
    for row in body:
        cell = row[index].strip().replace(",", "") if index < len(row) else ""
        try:
            numbers.append(int(cell))
        except ValueError:
            try:
                number = float(cell)
            except ValueError:
                skipped += 1
                continue
            if math.isfinite(number):
                numbers.append(number)
            else:
                skipped += 1
    if skipped:
        ctx.note(f"{skipped} cell(s) of column {column!r} are not numbers and were skipped")
    if all(isinstance(n, int) for n in numbers):
        return sum(numbers)
    total = round(math.fsum(numbers), 10)
    return int(total) if total.is_integer() and abs(total) < 2**53 else total


# -- encodings ----------------------------------------------------------------------------


def encoding(ctx: ProbeContext, path: str) -> dict[str, Any]:
    """Encoding facts: BOM, UTF-8 validity, NUL bytes, line endings."""
    _, data = read_bytes(ctx, path)
    bom, _ = sniff_bom(data)
    try:
        data.decode(bom or "utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    crlf = data.count(b"\r\n")
    lf = data.count(b"\n") - crlf
    endings = "none" if not (crlf or lf) else "crlf" if not lf else "lf" if not crlf else "mixed"
    return {
        "encoding": (bom or "utf-8") if valid else "unknown",
        "bom": bom is not None,
        "valid": valid,
        "nul_bytes": data.count(b"\x00"),
        "line_endings": endings,
        "size": len(data),
    }
