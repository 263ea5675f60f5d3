"""Helpers for the sandbox tests: real backends, host canaries, process scans."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from _support import skip_or_fail
from keel.config import SandboxConfig, validate
from keel.core.errors import SandboxError
from keel.sandbox import Sandbox, detect, get_sandbox

CANARY = "KEEL-CANARY-7f3a9c"
"""Text that must never appear in a sandboxed process's output."""
PYTHON = "/usr/bin/python3"
"""The interpreter escape payloads run with (the distribution's, reachable by any uid)."""

SandboxFactory = Callable[..., Sandbox]


def config(**overrides: object) -> SandboxConfig:
    return validate(SandboxConfig, overrides)


def make_sandbox(backend: str, **overrides: object) -> Sandbox:
    """A real sandbox of ``backend``; skips (fails in CI) when it does not work here."""
    cfg = config(**overrides)
    if os.geteuid() != 0 and "uid" in overrides:
        pytest.skip("dedicated sandbox uids need root")
    status = detect(cfg).status(backend)  # type: ignore[arg-type]
    if not status.available:
        skip_or_fail(f"{backend} sandbox unusable here: {status.reason}")
    try:
        return get_sandbox(cfg, backend=backend)  # type: ignore[arg-type]
    except SandboxError as exc:
        skip_or_fail(f"{backend} sandbox unusable here: {exc}")
        raise


@dataclass(frozen=True)
class Host:
    """A 0755 base dir holding a workspace and, outside it, canaries the sandbox must not see."""

    base: Path
    workspace: Path
    canary: Path
    """World-readable: only the sandbox stops a read."""
    secret: Path
    """Root-only (0600), like /etc/shadow."""
    home: Path
    """A HOME-like dir with ``.ssh/id_rsa`` (world-readable canary)."""


def make_host(base: Path) -> Host:
    workspace = base / "ws"
    workspace.mkdir(mode=0o755)
    (workspace / "data.txt").write_text("hello\n")
    (workspace / "sub").mkdir(mode=0o755)
    (workspace / "sub" / "nested.txt").write_text("nested\n")
    for path in (workspace / "data.txt", workspace / "sub" / "nested.txt"):
        path.chmod(0o644)
    canary = base / "canary.txt"
    canary.write_text(CANARY + "\n")
    canary.chmod(0o644)
    secret = base / "secret.txt"
    secret.write_text(CANARY + " secret\n")
    secret.chmod(0o600)
    home = base / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o755)
    (home / ".ssh").chmod(0o755)
    key = home / ".ssh" / "id_rsa"
    key.write_text(CANARY + " ssh key\n")
    key.chmod(0o644)
    return Host(base, workspace, canary, secret, home)


def tree_digest(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry below ``root`` with its kind and content (or link target)."""
    out: dict[str, tuple[str, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", oct(path.stat().st_mode))
            else:
                out[rel] = ("file", path.read_bytes())
    return out


def processes_of(uid: int) -> list[str]:
    """``pid comm state`` of every live process of ``uid`` (zombies included)."""
    found: list[str] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        found.append(f"{entry.name} {comm} {state}")
    return found
