from __future__ import annotations

import json
from pathlib import Path

from probe_helpers import error_code, probe

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def write(workdir: Path, name: str, data: str | bytes) -> str:
    path = workdir / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return name


def test_json_strict(workdir: Path) -> None:
    assert probe(workdir, "parse.json", write(workdir, "ok.json", '{"a": [1, 2.5]}')).value == {
        "a": [1, 2.5]
    }
    for text in ('{"a": NaN}', "[Infinity]", "[-Infinity]"):
        assert error_code(probe(workdir, "parse.json", write(workdir, "n.json", text))) == (
            "json.non_finite"
        )
    assert error_code(probe(workdir, "parse.json", write(workdir, "e.json", "[1e999]"))) == (
        "json.number_range"
    )
    result = probe(workdir, "parse.json", write(workdir, "s.json", '{\n  "a": 1,\n}'))
    assert error_code(result) == "json.syntax"
    assert result.error is not None and result.error.line == 3
    deep = probe(workdir, "parse.json", write(workdir, "deep.json", "[" * 100_000 + "]" * 100_000))
    assert error_code(deep) in ("json.too_deep", "parse.too_deep")
    mid = probe(workdir, "parse.json", write(workdir, "mid.json", "[" * 500 + "]" * 500))
    assert error_code(mid) == "parse.too_deep"


def test_yaml_safe_and_bounded(workdir: Path) -> None:
    good = write(workdir, "c.yaml", "database:\n  host: db.local\n  port: 5432\nwhen: 2024-01-02\n")
    assert probe(workdir, "parsing.safe_load_yaml", good).value == {
        "database": {"host": "db.local", "port": 5432},
        "when": "2024-01-02",
    }
    bomb = probe(workdir, "parse.yaml", write(workdir, "bomb.yaml", BILLION_LAUGHS))
    assert error_code(bomb) == "parse.too_large"
    many = "x: &x 1\ny: [" + ",".join(["*x"] * 1500) + "]\n"
    assert (
        error_code(probe(workdir, "parse.yaml", write(workdir, "m.yaml", many))) == "yaml.aliases"
    )
    cycle = probe(workdir, "parse.yaml", write(workdir, "cyc.yaml", "a: &a [*a]\n"))
    assert error_code(cycle) in ("parse.too_deep", "parse.too_large")
    deep = probe(workdir, "parse.yaml", write(workdir, "deep.yaml", "[" * 50_000 + "]" * 50_000))
    assert not deep.ok and deep.error is not None
    evil = probe(
        workdir,
        "parse.yaml",
        write(workdir, "evil.yaml", "!!python/object/apply:os.system ['id']\n"),
    )
    assert error_code(evil) == "yaml.syntax"
    bad = probe(workdir, "parse.yaml", write(workdir, "bad.yaml", "a: [1, 2\nb: 3\n"))
    assert error_code(bad) == "yaml.syntax" and bad.error is not None and bad.error.line
    assert error_code(
        probe(workdir, "parse.yaml", write(workdir, "two.yaml", "a: 1\n---\nb: 2\n"))
    ) == ("yaml.syntax")


def test_toml_ini_dotenv(workdir: Path) -> None:
    assert probe(
        workdir, "parse.toml", write(workdir, "p.toml", 'a = 1\n[t]\nb = "x"\n')
    ).value == {
        "a": 1,
        "t": {"b": "x"},
    }
    bad = probe(workdir, "parse.toml", write(workdir, "b.toml", "a = 1\na = 2\n"))
    assert error_code(bad) == "toml.syntax" and bad.error is not None and bad.error.line == 2
    assert error_code(probe(workdir, "parse.toml", write(workdir, "u.toml", b"a = '\xff'\n"))) == (
        "encoding.invalid"
    )
    ini = write(workdir, "s.ini", "[db]\nhost = x\nport = 1\n")
    assert probe(workdir, "parse.ini", ini).value == {"db": {"host": "x", "port": "1"}}
    assert error_code(probe(workdir, "parse.ini", write(workdir, "n.ini", "host = x\n"))) == (
        "ini.no_section"
    )
    assert error_code(probe(workdir, "parse.ini", write(workdir, "d.ini", "[a]\n[a]\n"))) == (
        "ini.duplicate"
    )
    env = write(workdir, ".env", "# c\nexport API_KEY='s3cret'\nDEBUG=1 # on\n")
    assert probe(workdir, "parse.dotenv", env).value == {
        "keys": ["API_KEY", "DEBUG"],
        "values": None,
    }
    refused = probe(workdir, "parse.dotenv", env, True)
    assert error_code(refused) == "dotenv.values_refused" and "s3cret" not in str(refused)
    example = write(workdir, "app.env.example", "DEBUG=1\n")
    assert probe(workdir, "parse.dotenv", example, True).value["values"]["DEBUG"] == "1"
    bad_env = probe(workdir, "parse.dotenv", write(workdir, "b.env", "OK=1\nnot a line\n"))
    assert error_code(bad_env) == "dotenv.syntax" and bad_env.error is not None
    assert bad_env.error.line == 2


def test_csv_headers_samples_and_hostile_rows(workdir: Path) -> None:
    name = write(workdir, "d.csv", "\ufeff日期,产品,营收\n1,A,10\n2,B\n\n3,C,5,extra\n")
    headers = probe(workdir, "parsing.inspect_csv_headers", name)
    assert headers.value == ["日期", "产品", "营收"]
    assert any("byte-order mark" in n for n in headers.notes)
    assert any("ragged" in n and "3, 5" in n for n in headers.notes)
    assert any("blank" in n for n in headers.notes)
    assert probe(workdir, "parse.csv_row_count", name).value == 3
    sample = probe(workdir, "parse.csv_sample", name, 2).value
    assert sample == [
        {"日期": "1", "产品": "A", "营收": "10"},
        {"日期": "2", "产品": "B", "营收": None},
    ]
    total = probe(workdir, "parse.csv_sum", name, "营收")
    assert total.value == 15 and any("not numbers" in n for n in total.notes)
    assert error_code(probe(workdir, "parse.csv_sum", name, "sales")) == "csv.no_column"
    semi = write(workdir, "s.csv", "a;b\n1;2.5\n")
    assert probe(workdir, "parse.csv_headers", semi).value == ["a", "b"]
    assert probe(workdir, "parse.csv_sum", semi, "b").value == 2.5
    nul = probe(workdir, "parse.csv_headers", write(workdir, "nul.csv", b"a,b\n1,\x002\n"))
    assert any("NUL" in n for n in nul.notes)
    assert (
        error_code(probe(workdir, "parse.csv_headers", write(workdir, "e.csv", ""))) == "csv.empty"
    )
    quote = probe(workdir, "parse.csv_headers", write(workdir, "q.csv", 'a,b\n"x,1\n'))
    assert error_code(quote) == "csv.syntax"
    latin = probe(workdir, "parse.csv_headers", write(workdir, "l.csv", b"caf\xe9,b\n"))
    assert error_code(latin) == "encoding.invalid"


def test_encoding_probe(workdir: Path) -> None:
    info = probe(
        workdir, "parse.encoding", write(workdir, "x.txt", b"\xef\xbb\xbfa\r\nb\r\n")
    ).value
    assert info["bom"] is True and info["valid"] and info["line_endings"] == "crlf"
    info = probe(workdir, "parse.encoding", write(workdir, "y.txt", b"\xff\x00a\n")).value
    assert info["valid"] is False and info["nul_bytes"] == 1


def test_results_are_json(workdir: Path) -> None:
    result = probe(
        workdir, "parse.yaml", write(workdir, "t.yaml", "1: x\nnull: y\ntrue: z\n2.5: w\n")
    )
    json.dumps(result.to_dict(), allow_nan=False)
    assert result.ok
