"""Probes never hand a secret to the model: files matching the secret globs, variable values."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_helpers import error_code, probe  # pyright: ignore[reportMissingImports]

SECRET_FILES = [".env", ".env.local", "config/.env.production", ".envrc", "id_rsa",
                "keys/id_ed25519", "certs/server.pem", ".git-credentials", "deploy/.netrc",
                "client.p12", ".ENV"]  # fmt: skip


def write(root: Path, name: str, text: str) -> str:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return name


@pytest.mark.parametrize("name", SECRET_FILES)
@pytest.mark.parametrize("function", ["fs.read_text", "parse.json", "parse.yaml", "parse.ini"])
def test_secret_files_are_refused(workdir: Path, name: str, function: str) -> None:
    path = write(workdir, name, "TOKEN=hunter2\n")
    result = probe(workdir, function, path)
    assert error_code(result) == "fs.secret", result
    assert "hunter2" not in str(result.to_dict())


def test_links_and_spellings_of_a_secret_are_refused(workdir: Path) -> None:
    write(workdir, ".env", "TOKEN=hunter2\n")
    (workdir / "notes.txt").symlink_to(workdir / ".env")
    for path in ("notes.txt", "./.env", "sub/../.env", str(workdir / ".env")):
        assert error_code(probe(workdir, "fs.read_text", path)) == "fs.secret", path


def test_examples_and_ordinary_files_are_read(workdir: Path) -> None:
    write(workdir, ".env.example", "TOKEN=\n")
    write(workdir, "README.md", "hello\n")
    write(workdir, "id_rsa.pub", "ssh-ed25519 AAAA\n")
    assert probe(workdir, "fs.read_text", ".env.example").value == "TOKEN=\n"
    assert probe(workdir, "fs.read_text", "README.md").value == "hello\n"
    assert probe(workdir, "fs.read_text", "id_rsa.pub").ok


def test_metadata_of_a_secret_is_fine(workdir: Path) -> None:
    write(workdir, ".env", "TOKEN=hunter2\n")
    assert probe(workdir, "fs.exists", ".env").value is True
    digest = probe(workdir, "fs.sha256", ".env")
    assert digest.ok and len(digest.value) == 64


def test_dotenv_gives_keys_never_values(workdir: Path) -> None:
    write(workdir, ".env", "export API_KEY='hunter2'\nDEBUG=1\n")
    keys = probe(workdir, "parse.dotenv", ".env")
    assert keys.value == {"keys": ["API_KEY", "DEBUG"], "values": None}
    assert any("never" in note for note in keys.notes)
    refused = probe(workdir, "parse.dotenv", ".env", True)
    assert error_code(refused) == "dotenv.values_refused"
    assert "hunter2" not in str(refused.to_dict())
    write(workdir, "settings.env", "MODE=fast\n")
    assert probe(workdir, "parse.dotenv", "settings.env", True).value["values"] == {"MODE": "fast"}


def test_env_get_redacts_every_value(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://u:hunter2@db/x")
    monkeypatch.setenv("PLAIN_NAME", "hunter2")
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("EMPTY_ONE", "")
    for name in ("DATABASE_URL", "PLAIN_NAME"):
        result = probe(workdir, "env.get", name)
        assert result.value == "<redacted>" and "hunter2" not in str(result.to_dict())
        assert any("characters" in note for note in result.notes)
    assert probe(workdir, "env.get", "CI").value == "true"  # a switch holds no secret
    assert probe(workdir, "env.get", "EMPTY_ONE").value == ""
    assert probe(workdir, "env.get", "NOT_SET_AT_ALL", "dflt").value == "dflt"
    assert probe(workdir, "env.has", "PLAIN_NAME").value is True
