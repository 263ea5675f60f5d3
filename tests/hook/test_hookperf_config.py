"""The hook path's config: a cached dump of the validated keel.toml, read without pydantic."""

from __future__ import annotations

import copy
import json
import marshal
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from _support import keel_env
from keel.config import KeelConfig, PolicyConfig, config_for, load_config
from keel.core.configview import config_data, config_view
from keel.core.errors import ConfigError, UsageError
from keel.core.schema import FrozenList
from keel.guard import Guard
from keel.monitor import Monitor

HEAVY = ("pydantic", "pydantic_core", "typer", "rich", "yaml", "tomllib", "click")
TOML = """
[policy]
preset = "strict"
allow = ["docker compose ps"]
protected = ["secrets/**"]

[scope]
include = ["src/**", "tests/**"]
exclude = ["src/vendor/**"]

[[constraints]]
text = "never touch the migrations"
id = "migrations"
protect = ["migrations/**"]
forbid = ["alembic downgrade"]

[gates]
required = ["pytest -q"]

[monitor]
repeat_consecutive = 7
"""


def _write(path: Path, text: str) -> None:
    """Write ``text`` with an mtime in the past, so the cache may store it at once."""
    path.write_text(text, encoding="utf-8")
    past = time.time_ns() - 60_000_000_000
    os.utime(path, ns=(past, past))


def _caches(root: Path) -> list[str]:
    folder = root / ".keel" / "cache"
    return sorted(p.name for p in folder.glob("config-*.marshal")) if folder.is_dir() else []


def test_the_hook_path_reads_the_validated_config_itself(workdir: Path) -> None:
    _write(workdir / "keel.toml", TOML)
    config_view(workdir)  # validates and fills the cache
    view = config_view(workdir)  # read back from the cache
    model = load_config(workdir / "keel.toml")
    assert type(view) is type(model) is KeelConfig
    assert view == model and view.to_dict() == model.to_dict()
    assert view.scope.include == ["src/**", "tests/**"]
    assert view.constraints[0].forbid == ["alembic downgrade"]


def test_defaults_without_keel_toml_match_the_schema(workdir: Path) -> None:
    assert config_view(workdir) == KeelConfig()
    assert _caches(workdir) == ["config-defaults.marshal"]
    assert config_view(workdir) == KeelConfig()  # from the cache
    assert config_view(workdir, "readonly").policy.preset == "readonly"
    assert config_view(workdir, "strict") == KeelConfig.for_preset("strict")


def test_a_cache_of_another_shape_is_validated_again(workdir: Path) -> None:
    _write(workdir / "keel.toml", '[policy]\npreset = "strict"\n')
    config_view(workdir)
    (name,) = _caches(workdir)
    cache = workdir / ".keel" / "cache" / name
    stored = marshal.loads(cache.read_bytes())
    del stored["config"]["monitor"]["seen_cap"]  # a field the classes have, the cache lacks
    stored["config"]["policy"]["preset"] = "developer"
    cache.write_bytes(marshal.dumps(stored))
    assert config_view(workdir).policy.preset == "strict"
    assert "seen_cap" in marshal.loads(cache.read_bytes())["config"]["monitor"]


def test_unknown_preset_is_a_usage_error(workdir: Path) -> None:
    with pytest.raises(UsageError):
        config_view(workdir, "lenient")


def test_the_config_is_read_only_all_the_way_down(workdir: Path) -> None:
    _write(workdir / "keel.toml", TOML)
    view = config_view(workdir)
    with pytest.raises(AttributeError):
        view.policy = PolicyConfig()  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(AttributeError):
        view.monitor.repeat_consecutive = 2  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(TypeError):
        view.scope.include.append("**")
    with pytest.raises(TypeError):
        view.gates.required[0] = "true"
    with pytest.raises(AttributeError):
        _ = view.no_such_section  # pyright: ignore[reportAttributeAccessIssue]
    assert isinstance(view.scope.include, FrozenList)
    assert view.scope.include == ["src/**", "tests/**"]
    assert copy.deepcopy(view) == view
    assert hash(view.scope.include) == hash(("src/**", "tests/**"))


def test_guard_and_monitor_read_the_cached_config(workdir: Path) -> None:
    _write(workdir / "keel.toml", TOML)
    guard = Guard.open(workdir, session_id="s", journal=False, checkpoints=False)
    assert isinstance(guard.config, KeelConfig)
    model = config_for(workdir)
    parsed_guard = Guard(
        root=workdir, config=model, policy=guard.policy, session_id="s", monitor=None
    )
    guard.monitor = None
    assert guard.session_context() == parsed_guard.session_context()
    assert "pytest -q" in guard.session_context()
    monitor = Monitor(config_view(workdir), session_id="s")
    assert monitor.may_finish()[0] is False  # the gate has not run


def test_cache_is_used_and_editing_invalidates_it(workdir: Path) -> None:
    toml = workdir / "keel.toml"
    _write(toml, '[policy]\npreset = "developer"\n')
    assert config_view(workdir).policy.preset == "developer"
    (cache,) = _caches(workdir)
    stored = marshal.loads((workdir / ".keel" / "cache" / cache).read_bytes())
    assert stored["config"]["policy"]["preset"] == "developer"
    # Same size, same (old) mtime: only the inode change time tells the edit apart.
    _write(toml, '[policy]\npreset = "readonly"\n'[:-1] + "\n")
    assert config_view(workdir).policy.preset == "readonly"
    _write(toml, '[policy]\npreset = "strict"\n')
    assert config_view(workdir).policy.preset == "strict"


def test_cache_with_a_foreign_key_or_garbage_is_ignored(workdir: Path) -> None:
    _write(workdir / "keel.toml", '[policy]\npreset = "strict"\n')
    config_view(workdir)
    (name,) = _caches(workdir)
    cache = workdir / ".keel" / "cache" / name
    stored = marshal.loads(cache.read_bytes())
    stored["key"][1] = "0.0.0-other-keel"
    stored["config"]["policy"]["preset"] = "developer"
    cache.write_bytes(marshal.dumps(stored))
    assert config_view(workdir).policy.preset == "strict"
    cache.write_bytes(b"{not marshal")
    assert config_view(workdir).policy.preset == "strict"
    assert marshal.loads(cache.read_bytes())["config"]["policy"]["preset"] == "strict"


def test_an_invalid_file_is_never_cached_and_always_raises(workdir: Path) -> None:
    toml = workdir / "keel.toml"
    _write(toml, '[policy]\npreset = "strict"\n')
    config_view(workdir)
    _write(toml, '[policy]\npreset = "yolo"\n')
    for _ in range(2):
        with pytest.raises(ConfigError) as err:
            config_data(str(workdir))
        assert err.value.code == "config.schema"
    _write(toml, "[policy\n")
    with pytest.raises(ConfigError):
        config_data(str(workdir))
    (name,) = _caches(workdir)
    assert b"yolo" not in (workdir / ".keel" / "cache" / name).read_bytes()


def test_a_fresh_file_is_validated_but_not_cached_yet(workdir: Path) -> None:
    (workdir / "keel.toml").write_text('[policy]\npreset = "strict"\n', encoding="utf-8")
    os.utime(workdir / "keel.toml", ns=(time.time_ns() + 10**10, time.time_ns() + 10**10))
    assert config_view(workdir).policy.preset == "strict"
    assert _caches(workdir) == []


PROBE = """
import os, sys
from keel.hook import main as hookpath
rc, out, err = hookpath.run(["PreToolUse", "--agent", "claude", "--workspace", sys.argv[1]])
os.write(1, out)
os.write(2, err)
modules = sorted(sys.modules)
import json
with open(sys.argv[2], "w") as fh:
    json.dump({"rc": rc, "modules": modules}, fh)
"""


def hook_process(
    root: Path,
    command: str,
    n: int,
    *,
    daemon: bool = False,
    session: str = "perf",
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``keel hook PreToolUse`` as a process: exit code, stdout, stderr, its modules."""
    payload = {
        "session_id": session,
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": f"toolu_{n}",
    }
    env = keel_env({"KEEL_HOOKD": "1" if daemon else "0", **(extra_env or {})})
    out = root.parent / f"{root.name}-probe-{n}.json"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, str(root), str(out)],
            input=json.dumps(payload).encode(),
            capture_output=True,
            check=False,
            env=env,
            cwd=root,
        )
        result = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    result["out"] = proc.stdout.decode()
    result["err"] = proc.stderr.decode()
    return result


@pytest.mark.parametrize("with_toml", [True, False])
def test_hook_for_ls_imports_nothing_heavy(workdir: Path, with_toml: bool) -> None:
    if with_toml:
        _write(workdir / "keel.toml", '[policy]\npreset = "developer"\n')
    first = hook_process(workdir, "ls", 1)  # validates once and fills the cache
    assert first["rc"] == 0 and "deny" not in first["out"], first
    second = hook_process(workdir, "ls", 2)
    assert second["rc"] == 0 and "deny" not in second["out"], second
    heavy = [m for m in second["modules"] if m.split(".")[0] in HEAVY]
    assert heavy == []
    assert "keel.workspace" not in second["modules"]  # no checkpoint for a read-only command
    assert "keel.config" not in second["modules"]


def test_hook_denies_with_the_config_error_when_keel_toml_breaks(workdir: Path) -> None:
    toml = workdir / "keel.toml"
    _write(toml, '[policy]\npreset = "developer"\n')
    assert hook_process(workdir, "ls", 1)["rc"] == 0
    _write(toml, '[policy]\npreset = "developer"\nbogus = 1\n')
    for n in (2, 3):
        broken = hook_process(workdir, "ls", n)
        assert broken["rc"] == 2, broken
        assert "config.schema" in broken["err"] and "bogus" in broken["err"]
    _write(toml, '[policy]\npreset = "developer"\n')
    assert hook_process(workdir, "ls", 4)["rc"] == 0
