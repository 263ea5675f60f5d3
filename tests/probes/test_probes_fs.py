from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from probe_helpers import error_code, probe

from keel.probes import PROBES, execute, resolve


def test_exists_file_dir_and_listing(workdir: Path) -> None:
    (workdir / "a.txt").write_text("hi")
    (workdir / "sub").mkdir()
    assert probe(workdir, "fs.exists", "a.txt").value is True
    assert probe(workdir, "filesystem.check_exists", "missing").value is False
    assert probe(workdir, "fs.is_file", "a.txt").value is True
    assert probe(workdir, "fs.is_dir", "sub").value is True
    assert probe(workdir, "fs.is_dir", "a.txt").value is False
    assert probe(workdir, "fs.list_dir", ".").value == ["a.txt", "sub/"]
    assert error_code(probe(workdir, "fs.list_dir", "a.txt")) == "fs.not_dir"
    info = probe(workdir, "fs.stat", "a.txt").value
    assert info["type"] == "file" and info["size"] == 2
    assert probe(workdir, "fs.stat", "nope").value is None


def test_read_text_sha256_glob(workdir: Path) -> None:
    (workdir / "src").mkdir()
    (workdir / "src" / "m.py").write_text("x = 1\n")
    (workdir / "top.py").write_text("y\n")
    assert probe(workdir, "fs.read_text", "src/m.py").value == "x = 1\n"
    digest = probe(workdir, "fs.sha256", "top.py").value
    assert digest == hashlib.sha256(b"y\n").hexdigest()
    assert probe(workdir, "fs.glob", "**/*.py").value == ["src/m.py", "top.py"]
    assert probe(workdir, "fs.glob", "*.py").value == ["top.py"]
    assert error_code(probe(workdir, "fs.glob", "../*")) == "path.invalid"


def test_readable_and_writable_without_writing(workdir: Path) -> None:
    (workdir / "r.txt").write_text("x")
    before = sorted(os.listdir(workdir))
    assert probe(workdir, "fs.readable", "r.txt").value is True
    assert probe(workdir, "fs.writable", "r.txt").value is True
    result = probe(workdir, "fs.writable", "new.txt")
    assert result.value is True
    assert any("does not exist yet" in n for n in result.notes)
    assert probe(workdir, "fs.writable", "nodir/new.txt").value is False
    assert probe(workdir, "fs.writable", ".").value is False
    assert sorted(os.listdir(workdir)) == before


def test_traversal_absolute_and_symlink_escapes(workdir: Path) -> None:
    (workdir / "link").symlink_to("/etc/passwd")
    (workdir / "dirlink").symlink_to("/etc")
    (workdir / "rel").symlink_to("../../../../etc/shadow")
    for bad in (
        "../x",
        "../../etc/passwd",
        "/etc/passwd",
        "/proc/self/environ",
        "link",
        "dirlink/hostname",
        "rel",
        "sub/../../x",
        "/dev/zero",
    ):
        for function in ("fs.read_text", "fs.exists", "parse.json", "fs.sha256"):
            result = probe(workdir, function, bad)
            assert not result.ok, (function, bad)
            assert error_code(result) == "path.outside_workspace", (function, bad)


def test_bad_paths_are_structured(workdir: Path) -> None:
    assert error_code(probe(workdir, "fs.exists", "a\x00b")) == "probe.arg_type"
    assert error_code(probe(workdir, "fs.exists", "x" * 5000)) == "path.invalid"
    assert error_code(probe(workdir, "fs.exists", "")) == "probe.arg_type"
    assert error_code(probe(workdir, "fs.exists", 3)) == "probe.arg_type"
    assert error_code(probe(workdir, "fs.exists")) == "probe.arg_count"
    assert error_code(probe(workdir, "fs.exists", "a", "b")) == "probe.arg_count"
    assert error_code(probe(workdir, "no.such")) == "probe.unknown_function"
    bad = {"function": "fs.exists", "args": ["x"], "workspace": "relative/dir"}
    assert error_code(execute(bad)) == "probe.bad_request"
    assert error_code(execute(["not", "a", "dict"])) == "probe.bad_request"


def test_fifo_is_never_opened(workdir: Path) -> None:
    os.mkfifo(workdir / "pipe")
    outcome: list[str | None] = []
    worker = threading.Thread(
        target=lambda: outcome.append(error_code(probe(workdir, "fs.read_text", "pipe")))
    )
    worker.start()
    worker.join(30)
    assert outcome == ["fs.not_regular"]
    assert probe(workdir, "fs.is_file", "pipe").value is False
    assert probe(workdir, "fs.stat", "pipe").value["type"] == "fifo"
    assert error_code(probe(workdir, "parse.csv_headers", "pipe")) == "fs.not_regular"


def test_huge_file_is_capped(workdir: Path) -> None:
    with (workdir / "big.json").open("wb") as handle:
        handle.truncate(5_000_000)
    assert error_code(probe(workdir, "parse.json", "big.json")) == "fs.too_large"
    assert error_code(probe(workdir, "fs.read_text", "big.json", 10)) == "fs.too_large"
    small = probe(workdir, "fs.read_text", "big.json", read_cap=100)
    assert error_code(small) == "fs.too_large"
    assert probe(workdir, "fs.readable", "big.json").value is False


def test_non_utf8_and_bom(workdir: Path) -> None:
    (workdir / "latin.txt").write_bytes(b"caf\xe9\n")
    result = probe(workdir, "fs.read_text", "latin.txt")
    assert error_code(result) == "encoding.invalid"
    assert result.error is not None and result.error.line == 1 and result.error.column == 4
    (workdir / "bom.txt").write_bytes(b"\xef\xbb\xbfhello")
    result = probe(workdir, "fs.read_text", "bom.txt")
    assert result.value == "hello" and any("byte-order mark" in n for n in result.notes)
    (workdir / "u16.txt").write_bytes("hé".encode("utf-16"))
    assert probe(workdir, "fs.read_text", "u16.txt").value == "hé"


def test_every_probe_is_registered_with_a_loadable_target() -> None:
    names = {spec.name for spec in PROBES}
    assert len(names) == len(PROBES)
    for spec in PROBES:
        assert callable(spec.load())
        for alias in spec.aliases:
            assert resolve(alias) is spec
    assert resolve("filesystem.is_dir") is resolve("fs.is_dir")
    assert resolve("parsing.safe_load_yaml") is resolve("parse.yaml")


def test_device_node_is_never_opened(workdir: Path) -> None:
    import stat

    try:
        os.mknod(workdir / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    except PermissionError:
        import pytest

        pytest.skip("creating a device node needs root")
    for function in ("fs.read_text", "parse.json", "fs.sha256", "parse.csv_headers"):
        assert error_code(probe(workdir, function, "zero")) == "fs.not_regular", function
    assert probe(workdir, "fs.stat", "zero").value["type"] == "char_device"
    assert probe(workdir, "fs.writable", "zero").value is False
