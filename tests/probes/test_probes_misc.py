from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from probe_helpers import error_code, probe


def test_data_probes(workdir: Path) -> None:
    config = {"database": {"host": "db", "ports": [5432, 5433]}}
    assert (
        probe(workdir, "data.get_nested_value", config, "database.host", "localhost").value == "db"
    )
    assert probe(workdir, "data.get_nested_value", config, "database.ports.1").value == 5433
    missing = probe(workdir, "data.get_nested_value", config, "database.user", "root")
    assert missing.value == "root" and any("default" in n for n in missing.notes)
    assert probe(workdir, "data.get_nested_value", None, "a.b", "d").value == "d"
    assert probe(workdir, "data.keys", config).value == ["database"]
    assert error_code(probe(workdir, "data.keys", [1])) == "data.not_object"
    assert probe(workdir, "data.type_of", [1]).value == "array"
    assert probe(workdir, "data.type_of", None).value == "null"
    assert probe(workdir, "data.length", "abc").value == 3
    assert error_code(probe(workdir, "data.length", 3)) == "data.no_length"
    assert probe(workdir, "data.value", "x").value == "x"


def test_env_probes_redact_secrets(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAN_TEST_MODE", "fast")
    monkeypatch.setenv("PLAN_TEST_API_TOKEN", "hunter2")
    mode = probe(workdir, "env.get", "PLAN_TEST_MODE")
    assert mode.value == "<redacted>" and "fast" not in str(mode.to_dict())
    secret = probe(workdir, "env.get", "PLAN_TEST_API_TOKEN")
    assert secret.value == "<redacted>" and "hunter2" not in str(secret.to_dict())
    assert probe(workdir, "env.get", "PLAN_TEST_ABSENT", "dflt").value == "dflt"
    assert probe(workdir, "env.has", "PLAN_TEST_MODE").value is True
    assert error_code(probe(workdir, "env.get", "BAD NAME")) == "env.bad_name"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def test_git_probes(workdir: Path) -> None:
    assert error_code(probe(workdir, "git.branch")) == "git.not_a_repo"
    _git(workdir, "init", "-q", "-b", "main")
    (workdir / "a.txt").write_text("a")
    _git(workdir, "add", "a.txt")
    _git(workdir, "commit", "-q", "-m", "init")
    assert probe(workdir, "git.branch").value == "main"
    assert probe(workdir, "git.is_clean").value is True
    assert probe(workdir, "git.tracked", "a.txt").value is True
    (workdir / "b.txt").write_text("b")
    (workdir / "a.txt").write_text("changed")
    assert probe(workdir, "git.is_clean").value is False
    assert probe(workdir, "git.changed_files").value == ["a.txt", "b.txt"]
    assert probe(workdir, "git.tracked", "b.txt").value is False
    assert error_code(probe(workdir, "git.tracked", "../x")) == "path.outside_workspace"


def test_python_probes(workdir: Path) -> None:
    (workdir / "m.py").write_text(
        "import os\nfrom . import x\nA = 1\nclass C:\n    def f(self): pass\nasync def g(): pass\n"
    )
    (workdir / "bad.py").write_text("def f(:\n")
    (workdir / "pkgmod.py").write_text("raise SystemExit('must not run')\n")
    symbols = probe(workdir, "python.symbols", "m.py").value
    assert symbols == {
        "functions": ["g"],
        "classes": {"C": ["f"]},
        "names": ["A"],
        "imports": ["os", "."],
    }
    bad = probe(workdir, "python.symbols", "bad.py")
    assert error_code(bad) == "python.syntax" and bad.error is not None and bad.error.line == 1
    assert probe(workdir, "python.compiles", "m.py").value is True
    broken = probe(workdir, "python.compiles", "bad.py")
    assert broken.value is False and broken.notes
    assert probe(workdir, "python.importable", "json").value is True
    assert probe(workdir, "python.importable", "pkgmod").value is True
    assert probe(workdir, "python.importable", "no_such_module_xyz").value is False
    assert error_code(probe(workdir, "python.importable", "os; rm")) == "python.bad_module"
    deep = workdir / "deep.py"
    deep.write_text("x = " + "(" * 5000 + ")" * 5000 + "\n")
    assert not probe(workdir, "python.symbols", "deep.py").ok


def test_cmd_probes(workdir: Path) -> None:
    assert probe(workdir, "cmd.which", "sh").value
    assert probe(workdir, "cmd.which", "no-such-program-xyz").value is None
    assert probe(workdir, "cmd.version", "git").value
    assert error_code(probe(workdir, "cmd.which", "sh; id")) == "cmd.bad_name"
    assert error_code(probe(workdir, "cmd.version", "/bin/sh")) == "cmd.bad_name"


@pytest.fixture
def local_server() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/missing":
                self.send_error(404)
                return
            if self.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", "http://example.invalid/")
                self.end_headers()
                return
            body = b"hello"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self) -> None:
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_probes(workdir: Path, local_server: str) -> None:
    assert error_code(probe(workdir, "http.get", local_server + "/")) == "http.disabled"
    allow = {"http_allow": ["127.0.0.1"]}
    got = probe(workdir, "http.get", local_server + "/", **allow).value
    assert got["status"] == 200 and got["body"] == "hello"
    assert probe(workdir, "http.head", local_server + "/", **allow).value["status"] == 204
    assert probe(workdir, "http.get", local_server + "/missing", **allow).value["status"] == 404
    redirect = probe(workdir, "http.get", local_server + "/redirect", **allow).value
    assert (
        redirect["status"] == 302 and redirect["headers"]["location"] == "http://example.invalid/"
    )
    other = probe(workdir, "http.get", "http://example.com/", **allow)
    assert error_code(other) == "http.not_allowed"
    assert error_code(probe(workdir, "http.get", "file:///etc/passwd", **allow)) == "http.bad_url"


def test_runner_module_prints_one_json_line(workdir: Path) -> None:
    (workdir / "c.yaml").write_text("a: 1\n")
    import json

    def call(stdin: bytes) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "keel.probes.runner"],
            input=stdin,
            capture_output=True,
            cwd=workdir,
            check=True,
            timeout=60,
        )
        lines = done.stdout.decode().splitlines()
        assert len(lines) == 1
        return json.loads(lines[0])

    ok = call(
        json.dumps({"function": "parse.yaml", "args": ["c.yaml"], "workspace": None}).encode()
    )
    assert ok["ok"] is True and ok["value"] == {"a": 1}
    assert call(b"not json")["error"]["code"] == "probe.bad_request"
    assert call(b"[]")["error"]["code"] == "probe.bad_request"
    surrogate = call(
        json.dumps({"function": "data.value", "args": ["\ud800"], "workspace": None}).encode()
    )
    assert surrogate["ok"] is True


def test_runner_batch_mode(workdir: Path) -> None:
    import json

    (workdir / "a.txt").write_text("a")
    batch = {
        "batch": [
            {"function": "fs.exists", "args": ["a.txt"], "workspace": None},
            {"function": "fs.exists", "args": ["../etc"], "workspace": None},
            {"function": "no.such", "args": [], "workspace": None},
        ]
    }
    done = subprocess.run(
        [sys.executable, "-m", "keel.probes.runner"],
        input=json.dumps(batch).encode(),
        capture_output=True,
        cwd=workdir,
        check=True,
        timeout=60,
    )
    results = json.loads(done.stdout)
    assert [r["ok"] for r in results] == [True, False, False]
    assert results[1]["error"]["code"] == "path.outside_workspace"
    assert results[2]["error"]["code"] == "probe.unknown_function"
