"""The external parser suites, run through the probes: 0 crashes, every invalid file rejected
with a structured error, valid files parsed to the expected values."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import pytest
from probe_helpers import probe

from _support import skip_or_fail
from keel.probes import ProbeResult

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "parsers"


def suite(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.is_dir():
        skip_or_fail(f"parser suite not found at {path}")
    return path


def run(root: Path, function: str, name: str, *args: Any) -> ProbeResult:
    result = probe(root, function, name, *args)
    json.dumps(result.to_dict(), allow_nan=False)  # always serialisable
    assert result.ok or (result.error is not None and result.error.code), name
    assert result.error is None or result.error.code != "probe.internal", (name, result.error)
    return result


def test_json_test_suite() -> None:
    root = suite("json", "test_parsing")
    names = sorted(p.name for p in root.iterdir() if p.suffix == ".json")
    assert len(names) > 300
    wrong: list[str] = []
    for name in names:
        result = run(root, "parse.json", name)
        if name.startswith("y_") and not result.ok:
            wrong.append(f"{name}: {result.error}")
        if name.startswith("n_") and result.ok:
            wrong.append(f"{name}: accepted")
    assert wrong == []


_TOML_TYPES = {
    "string",
    "integer",
    "float",
    "bool",
    "datetime",
    "datetime-local",
    "date-local",
    "time-local",
}


def untag(value: Any) -> Any:
    if isinstance(value, list):
        return [untag(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"type", "value"} and value.get("type") in _TOML_TYPES:
            return value
        return {k: untag(v) for k, v in value.items()}
    return value


def same(expected: Any, ours: Any) -> bool:
    if (
        isinstance(expected, dict)
        and set(expected) == {"type", "value"}
        and expected["type"] in _TOML_TYPES
    ):
        kind, text = expected["type"], expected["value"]
        match kind:
            case "string":
                return ours == text
            case "integer":
                return isinstance(ours, int) and ours == int(text)
            case "float":
                number = float(text)
                if math.isfinite(number):
                    return isinstance(ours, int | float) and float(ours) == number
                return ours == str(number)
            case "bool":
                return ours is (text == "true")
            case "datetime" | "datetime-local":
                return dt.datetime.fromisoformat(ours) == dt.datetime.fromisoformat(
                    text.replace("z", "Z")
                )
            case "date-local":
                return dt.date.fromisoformat(ours) == dt.date.fromisoformat(text)
            case _:
                return dt.time.fromisoformat(ours) == dt.time.fromisoformat(text)
    if isinstance(expected, dict):
        return (
            isinstance(ours, dict)
            and set(expected) == set(ours)
            and all(same(expected[k], ours[k]) for k in expected)
        )
    if isinstance(expected, list):
        return (
            isinstance(ours, list)
            and len(expected) == len(ours)
            and all(same(e, o) for e, o in zip(expected, ours, strict=True))
        )
    return expected == ours


def test_toml_test_suite() -> None:
    root = suite("toml", "tests")
    listed = (root / "files-toml-1.0.0").read_text().split()
    valid = [n for n in listed if n.startswith("valid/") and n.endswith(".toml")]
    invalid = [n for n in listed if n.startswith("invalid/") and n.endswith(".toml")]
    assert len(valid) > 150 and len(invalid) > 300
    wrong: list[str] = []
    for name in valid:
        result = run(root, "parse.toml", name)
        expected_file = root / name.replace(".toml", ".json")
        if not result.ok:
            wrong.append(f"{name}: {result.error}")
        elif expected_file.exists() and not same(
            untag(json.loads(expected_file.read_text())), result.value
        ):
            wrong.append(f"{name}: value differs")
    for name in invalid:
        if run(root, "parse.toml", name).ok:
            wrong.append(f"{name}: accepted")
    assert wrong == []


UPSTREAM_MISMATCH = {
    # csv-spectrum's expected JSON has 1234567890 where its CSV has 2095257564
    "location_coordinates": ("Contact Phone Number",),
}


def test_csv_spectrum() -> None:
    root = suite("csv")
    names = sorted(p.stem for p in (root / "csvs").glob("*.csv"))
    assert len(names) >= 10
    for name in names:
        result = run(root, "parse.csv_sample", f"csvs/{name}.csv", 1000)
        expected = json.loads((root / "json" / f"{name}.json").read_text())
        assert result.ok, (name, result.error)
        if isinstance(expected, dict):  # upstream stores this one case as a bare object
            expected = [expected]
        for field in UPSTREAM_MISMATCH.get(name, ()):
            for row in (*expected, *result.value):
                row.pop(field, None)
        assert result.value == expected, name


@pytest.mark.parametrize("function", ["parse.csv_headers", "parse.csv_row_count", "parse.encoding"])
def test_csv_spectrum_other_probes(function: str) -> None:
    root = suite("csv")
    for path in sorted((root / "csvs").glob("*.csv")):
        assert run(root, function, f"csvs/{path.name}").ok, path.name
