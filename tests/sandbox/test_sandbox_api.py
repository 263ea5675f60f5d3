"""The sandbox seam: selection, the unsafe backend, run_python, artifacts, the test double, CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from sandbox_helpers import CANARY, Host, make_sandbox, tree_digest
from typer.testing import CliRunner

import keel.sandbox
from keel.cli.sandbox import register
from keel.config import SandboxConfig, parse_config
from keel.core.errors import SandboxError
from keel.sandbox import (
    BackendStatus,
    Sandbox,
    SandboxResult,
    detect,
    get_sandbox,
    read_artifact,
)
from keel.sandbox.probe._detect import select_backend
from keel.sandbox.probe.testing import FunctionSandbox, SandboxCall, result


def statuses(**available: bool) -> dict[str, BackendStatus]:
    return {
        name: BackendStatus(
            name, available.get(name, False), name != "none-unsafe", reason=f"{name} broken"
        )  # type: ignore[arg-type]
        for name in ("bwrap", "landlock", "none-unsafe")
    }


def test_public_surface() -> None:
    assert len(set(keel.sandbox.__all__)) == len(keel.sandbox.__all__)
    for name in keel.sandbox.__all__:
        assert hasattr(keel.sandbox, name)


def test_selection_prefers_bwrap_then_landlock() -> None:
    both = statuses(bwrap=True, landlock=True)
    assert select_backend("auto", both.__getitem__, unsafe=False) == "bwrap"
    only_landlock = statuses(landlock=True)
    assert select_backend("auto", only_landlock.__getitem__, unsafe=False) == "landlock"
    assert select_backend("landlock", both.__getitem__, unsafe=False) == "landlock"


def test_selection_refuses_without_unsafe() -> None:
    none = statuses()
    with pytest.raises(SandboxError) as err:
        select_backend("auto", none.__getitem__, unsafe=False)
    assert err.value.code == "sandbox.unavailable"
    assert err.value.context["reasons"] == {"bwrap": "bwrap broken", "landlock": "landlock broken"}
    assert select_backend("auto", none.__getitem__, unsafe=True) == "none-unsafe"


def test_selection_never_downgrades_a_forced_backend() -> None:
    none = statuses()
    with pytest.raises(SandboxError, match="bwrap broken"):
        select_backend("bwrap", none.__getitem__, unsafe=True)
    with pytest.raises(SandboxError):
        select_backend("none-unsafe", none.__getitem__, unsafe=False)


def test_get_sandbox_forced_backends_are_real() -> None:
    assert make_sandbox("bwrap").name == "bwrap"
    assert make_sandbox("landlock").name == "landlock"
    with pytest.raises(SandboxError) as err:
        get_sandbox(SandboxConfig(), backend="none-unsafe")
    assert err.value.code == "sandbox.unavailable"
    assert get_sandbox(SandboxConfig(), backend="none-unsafe", unsafe=True).name == "none-unsafe"


def test_config_selects_the_backend() -> None:
    config = parse_config('[sandbox]\nbackend = "landlock"\n').sandbox
    if not detect(config).status("landlock").available:
        pytest.skip("landlock unusable here")
    assert detect(config).chosen == "landlock"
    assert get_sandbox(config).name == "landlock"


def test_detect_reports_every_backend() -> None:
    report = detect()
    assert [b.name for b in report.backends] == ["bwrap", "landlock", "none-unsafe"]
    assert report.status("none-unsafe").safe is False
    data = report.to_dict()
    assert data["safe"] == report.safe
    json.dumps(data)
    assert detect() is not None  # cached: cheap to call again


def test_unsafe_backend_runs_with_timeout_and_group_kill(host: Host) -> None:
    sandbox = get_sandbox(SandboxConfig(), unsafe=True, backend="none-unsafe")
    done = sandbox.run(
        ["/bin/sh", "-c", "cat data.txt"], workspace=host.workspace, mode="probe", timeout=30
    )
    assert done == SandboxResult(0, b"hello\n", b"", False, "none-unsafe", done.duration_ms)
    marker = f"keel-unsafe-{os.getpid()}"
    script = f"sleep 300 & exec -a {marker} sleep 300"
    done = sandbox.run(
        ["/bin/bash", "-c", script], workspace=host.workspace, mode="probe", timeout=1
    )
    assert done.timed_out and done.exit_code is None
    assert not [p for p in Path("/proc").glob("[0-9]*") if _cmdline_has(p, marker)]


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_unsafe_exec_mode_uses_a_scratch_copy(host: Host) -> None:
    sandbox = get_sandbox(SandboxConfig(), unsafe=True, backend="none-unsafe")
    before = tree_digest(host.workspace)
    done = sandbox.run(
        ["/bin/sh", "-c", "echo x > data.txt && cat data.txt"],
        workspace=host.workspace,
        mode="exec",
        timeout=30,
    )
    assert done.stdout == b"x\n"
    assert tree_digest(host.workspace) == before


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
def test_run_python_selftest(host: Host, backend: str) -> None:
    sandbox = make_sandbox(backend)
    probe = sandbox.run_python(
        "keel.sandbox.probe._selftest", workspace=host.workspace, timeout=60, stdin=b"ping"
    )
    assert probe.exit_code == 0, probe.stderr.decode()
    info = json.loads(probe.stdout)
    assert info["uid"] != 0
    assert info["can_write_workspace"] is False
    assert info["libyaml"] is True
    assert info["stdin"] == "ping"
    assert info["cwd"] == ("/workspace" if backend == "bwrap" else str(host.workspace))
    assert not info["executable"].startswith("/root")
    exec_run = sandbox.run_python(
        "keel.sandbox.probe._selftest", workspace=host.workspace, mode="exec", timeout=60
    )
    assert json.loads(exec_run.stdout)["can_write_workspace"] is True


def test_run_python_ignores_modules_planted_in_the_workspace(host: Host) -> None:
    sandbox = make_sandbox("bwrap")
    planted = host.workspace / "keel"
    planted.mkdir()
    (planted / "__init__.py").write_text("raise SystemExit('planted keel imported')\n")
    (host.workspace / "json.py").write_text("raise SystemExit('planted json imported')\n")
    done = sandbox.run_python("keel.sandbox.probe._selftest", workspace=host.workspace, timeout=60)
    assert done.exit_code == 0, done.stderr.decode()


def test_run_python_rejects_a_bad_module_name(host: Host) -> None:
    sandbox = make_sandbox("bwrap")
    with pytest.raises(SandboxError) as err:
        sandbox.run_python("keel; rm -rf /", workspace=host.workspace, timeout=5)
    assert err.value.code == "sandbox.argv"


def test_unreachable_workspace_is_a_clear_error(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a dir the sandbox uid cannot reach")
    sandbox = make_sandbox("bwrap")
    private = tmp_path / "ws"  # pytest's tmp_path has a 0700 parent
    private.mkdir()
    tmp_path.chmod(0o700)
    with pytest.raises(SandboxError) as err:
        sandbox.run(["/usr/bin/true"], workspace=private, mode="probe", timeout=5)
    assert err.value.code == "sandbox.workspace_unreachable"


def test_stdin_bytes_larger_than_a_pipe_buffer(host: Host) -> None:
    sandbox = make_sandbox("bwrap")
    data = os.urandom(1 << 20)
    done = sandbox.run(
        ["/usr/bin/wc", "-c"], workspace=host.workspace, mode="probe", timeout=30, stdin=data
    )
    assert done.stdout.strip() == str(len(data)).encode()


def test_env_is_passed_and_validated(host: Host) -> None:
    sandbox = make_sandbox("bwrap")
    done = sandbox.run(
        ["/bin/sh", "-c", "echo $GREETING"],
        workspace=host.workspace,
        mode="probe",
        timeout=30,
        env={"GREETING": "hi"},
    )
    assert done.stdout == b"hi\n"
    with pytest.raises(SandboxError):
        sandbox.run(["true"], workspace=host.workspace, mode="probe", timeout=30, env={"A=B": "x"})


def test_read_artifact_refuses_symlinks_planted_by_the_sandbox(host: Host) -> None:
    # What a sandboxed command can leave in a directory it may write: links to host secrets.
    out = host.base / "out"
    out.mkdir()
    (out / "artifact.txt").symlink_to(host.secret)
    (out / "sub").symlink_to(host.base)
    (out / "ok.txt").write_text("fine")
    os.mkfifo(out / "fifo")
    for name in (
        "artifact.txt",
        "sub/secret.txt",
        "sub/canary.txt",
        "fifo",
        "../canary.txt",
        "/etc/shadow",
    ):
        with pytest.raises(SandboxError) as err:
            read_artifact(out, name, 1 << 20)
        assert err.value.code == "sandbox.artifact"
    assert read_artifact(out, "ok.txt", 100) == b"fine"
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_artifact(fd, "ok.txt", 100) == b"fine"
        with pytest.raises(SandboxError, match="larger"):
            read_artifact(fd, "ok.txt", 2)
    finally:
        os.close(fd)
    assert CANARY.encode() not in (out / "ok.txt").read_bytes()


def test_function_sandbox_records_calls(host: Host) -> None:
    def handler(call: SandboxCall) -> SandboxResult:
        return result(
            json.dumps({"module": call.module, "stdin": (call.stdin or b"").decode()}).encode()
        )

    double = FunctionSandbox(handler)
    assert isinstance(double, Sandbox)
    done = double.run_python("keel.probes.runner", workspace=host.workspace, timeout=5, stdin=b"{}")
    assert json.loads(done.stdout) == {"module": "keel.probes.runner", "stdin": "{}"}
    double.run(["ls"], workspace=host.workspace, mode="exec", timeout=1)
    assert [c.mode for c in double.calls] == ["probe", "exec"]


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    register(app)
    return app


def test_cli_check_json(host: Host) -> None:
    runner = CliRunner()
    done = runner.invoke(_app(), ["sandbox", "check", "--json", "--workspace", str(host.workspace)])
    data = json.loads(done.stdout)
    assert done.exit_code == (0 if data["safe"] else 1)
    assert {b["name"] for b in data["backends"]} == {"bwrap", "landlock", "none-unsafe"}
    assert data["chosen"] in ("bwrap", "landlock", None)
    text = runner.invoke(_app(), ["sandbox", "check", "--workspace", str(host.workspace)])
    assert "chosen" in text.stdout


def test_cli_run(host: Host) -> None:
    make_sandbox("bwrap")
    runner = CliRunner()
    done = runner.invoke(
        _app(),
        [
            "sandbox",
            "run",
            "--workspace",
            str(host.workspace),
            "--",
            "/bin/sh",
            "-c",
            "cat data.txt; exit 3",
        ],
    )
    assert done.exit_code == 3
    assert "hello" in done.stdout


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
def test_parallel_runs_from_threads(host: Host, backend: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    sandbox = make_sandbox(backend)

    def one(i: int) -> bytes:
        done = sandbox.run(
            ["/bin/sh", "-c", f"cat data.txt; echo {i}; exit {i % 3}"],
            workspace=host.workspace,
            mode="exec" if i % 2 else "probe",
            timeout=60,
        )
        assert done.exit_code == i % 3, done.stderr
        return done.stdout

    with ThreadPoolExecutor(4) as pool:
        outputs = list(pool.map(one, range(12)))
    assert outputs == [f"hello\n{i}\n".encode() for i in range(12)]


def test_cli_run_unsafe_is_refused_without_the_flag_and_journaled_with_it(host: Host) -> None:
    from keel.journal import open_journal

    runner = CliRunner()
    base = ["sandbox", "run", "--workspace", str(host.workspace), "--backend", "none-unsafe"]
    refused = runner.invoke(_app(), [*base, "--", "/bin/true"])
    assert refused.exit_code == 1
    assert "sandbox.unavailable" in refused.stderr
    done = runner.invoke(_app(), [*base, "--unsafe-no-sandbox", "--", "/bin/sh", "-c", "pwd"])
    assert done.exit_code == 0
    assert done.stdout.strip() == str(host.workspace)
    assert "UNSANDBOXED" in done.stderr
    with open_journal(host.workspace) as journal:
        events = [e for e in journal.events() if e.kind == "config"]
    assert [e.payload.data["sandbox"] for e in events] == ["none-unsafe"]  # type: ignore[union-attr]
