"""keel exec, by effect: HOME's secrets, secret variables and injected variables stay out."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from exec_helpers import HOME_SECRETS, KEEL, SECRET, Box, make_box, require_backend


def _all_workspace_bytes(ws: Path) -> bytes:
    return b"".join(p.read_bytes() for p in ws.rglob("*") if p.is_file() and not p.is_symlink())


def test_home_secrets_never_come_out(box: Box) -> None:
    attempts = [f'cat "$HOME/{rel}" ~/{rel} {box.home}/{rel}' for rel in HOME_SECRETS]
    attempts += [
        f"cp -r {box.home}/.ssh stolen; cp {box.home}/.aws/credentials aws.txt",
        f"ln -s {box.home}/.ssh/id_rsa key && cat key > copy.txt",
        "grep -r KEEL-EXEC-SECRET ~ /tmp /etc . 2>/dev/null | head -5",
        "cat ~/.gitconfig",
        "env; cat /proc/self/environ",
    ]
    done = box.sh("; ".join(attempts) + "; true")
    assert SECRET not in done.stdout + done.stderr
    assert SECRET.encode() not in _all_workspace_bytes(box.ws)


def test_home_is_fresh_with_git_config_and_toolchains_only(bwrap_box: Box) -> None:
    done = bwrap_box.sh("ls -A ~")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [".gitconfig"]


def test_git_identity_survives_the_credential_filter(box: Box) -> None:
    done = box.run("git", "config", "--global", "--list")
    assert "user.name=Box Tester" in done.stdout
    assert "extraheader" not in done.stdout


def test_secret_variables_are_removed(box: Box) -> None:
    env = {
        "GITHUB_TOKEN": SECRET,
        "ANTHROPIC_API_KEY": SECRET,
        "OPENAI_API_KEY": SECRET,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "MY_PASSWORD": SECRET,
        "DATABASE_URL": f"postgres://app:{SECRET}@db/app",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "KEEP_ME": "visible",
    }
    done = box.run("/usr/bin/env", env=env)
    assert SECRET not in done.stdout
    assert "SSH_AUTH_SOCK" not in done.stdout
    assert "KEEP_ME=visible" in done.stdout


def test_keel_sets_home_tmpdir_and_proxy_variables(box: Box) -> None:
    done = box.run("/usr/bin/env", env={"HTTPS_PROXY": "http://evil:1", "NO_PROXY": "*"})
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert env["HOME"] != "" and env["TMPDIR"] != ""
    assert env["HTTPS_PROXY"].startswith("http://127.0.0.1:")
    assert env["NO_PROXY"] == ""
    assert env["PATH"] == box.env["PATH"]


@pytest.mark.parametrize(
    ("variables", "probe"),
    [
        ({"LD_PRELOAD": "/nonexistent/evil.so"}, "echo LD=$LD_PRELOAD"),
        ({"BASH_ENV": "{ws}/evil.sh"}, "bash -c 'echo clean'"),
        ({"ENV": "{ws}/evil.sh"}, "sh -i -c 'echo clean' 2>/dev/null"),
        (
            {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor",
             "GIT_CONFIG_VALUE_0": "{ws}/evil.sh"},
            "git status --short >/dev/null; git config core.fsmonitor; echo clean",
        ),
        ({"NODE_OPTIONS": "--require {ws}/evil.js"}, "echo NODE=$NODE_OPTIONS"),
        ({"PROMPT_COMMAND": "{ws}/evil.sh", "PS4": "$({ws}/evil.sh)"}, "bash -xc true"),
        ({"BASH_FUNC_ls%%": "() {{ {ws}/evil.sh; }}"}, "bash -c 'ls >/dev/null'"),
        ({"GIT_SSH_COMMAND": "{ws}/evil.sh", "GIT_EXTERNAL_DIFF": "{ws}/evil.sh"},
         "git diff >/dev/null; echo clean"),
    ],
)  # fmt: skip
def test_injected_variables_have_no_effect(box: Box, variables: dict[str, str], probe: str) -> None:
    evil = box.ws / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {box.ws}/PWNED\necho PWNED\n")
    evil.chmod(0o755)
    (box.ws / "evil.js").write_text(f"require('fs').writeFileSync('{box.ws}/PWNED', '')\n")
    subprocess.run(["git", "init", "-q", str(box.ws)], check=True)
    env = {k: v.format(ws=box.ws) for k, v in variables.items()}
    done = box.sh(probe, env=env)
    assert "PWNED" not in done.stdout
    assert not (box.ws / "PWNED").exists()
    assert "evil" not in done.stdout


def test_ld_preload_of_a_real_library_is_not_loaded(box: Box, workdir: Path) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a preload library")
    source = workdir / "evil.c"
    source.write_text(
        "#define _GNU_SOURCE\n#include <errno.h>\n#include <stdio.h>\n"
        "__attribute__((constructor)) static void pwn(void) { char n[256];\n"
        f'  snprintf(n, sizeof n, "{box.ws}/PWNED-%s", program_invocation_short_name);\n'
        '  FILE *f = fopen(n, "w"); if (f) fclose(f); }\n'
    )
    lib = workdir / "evil.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    box.sh("/bin/true; /bin/ls >/dev/null", env={"LD_PRELOAD": str(lib)})
    # keel exec itself is the caller's process and loads what the caller preloads; nothing
    # started inside the sandbox does.
    loaded = sorted(p.name for p in box.ws.glob("PWNED-*"))
    assert [n for n in loaded if not n.startswith("PWNED-python")] == []


def test_keel_state_dir_is_not_visible(box: Box) -> None:
    state = Path(box.env["KEEL_STATE_DIR"])
    (state / "journal.key").write_text(SECRET)
    done = box.sh(f"ls -A {state}; cat {state}/journal.key; ls -A ~/.local/state 2>&1")
    assert SECRET not in done.stdout
    assert "journal.key" not in done.stdout


def test_hook_daemon_socket_is_unreachable(box: Box) -> None:
    keel = box.ws / ".keel"
    keel.mkdir()
    path = keel / "hookd.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(0.5)
    try:
        done = box.run(
            "/usr/bin/python3",
            "-c",
            "import socket,sys; s=socket.socket(socket.AF_UNIX); "
            f"s.connect({str(path)!r}); print('CONNECTED')",
        )
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert "CONNECTED" not in done.stdout
    assert done.returncode != 0


def test_configured_secret_in_home_read_only_is_refused(box: Box) -> None:
    box.config('[sandbox]\nhome_read_only = ["~/.ssh"]\n')
    done = box.run("/bin/true")
    assert done.returncode == 125
    assert "sandbox.secret" in done.stderr
    assert ".ssh" in done.stderr


@pytest.mark.parametrize("entry", ["~", "/", "~/.aws/credentials", "/etc"])
def test_configured_writable_secret_or_system_tree_is_refused(box: Box, entry: str) -> None:
    box.config(f'[sandbox]\nwritable = ["{entry}"]\n')
    done = box.run("/bin/true")
    assert done.returncode == 125, done.stderr
    assert "writable" in done.stderr


def test_configured_home_entry_is_visible_read_only(box: Box) -> None:
    (box.home / "notes.txt").write_text("notes\n")
    box.config('[sandbox]\nhome_read_only = ["notes.txt"]\n')
    done = box.sh("cat ~/notes.txt && echo x >> ~/notes.txt")
    assert done.stdout == "notes\n"
    assert (box.home / "notes.txt").read_text() == "notes\n"


def test_toolchain_under_home_is_found_read_only(box: Box) -> None:
    tool = box.home / ".toolx" / "bin" / "toolx"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho toolx works\n")
    tool.chmod(0o755)
    path = f"{tool.parent}:{box.env['PATH']}"
    done = box.sh(f"toolx && echo x > {tool}", env={"PATH": path})
    assert done.stdout.startswith("toolx works")
    assert tool.read_text().startswith("#!/bin/sh")


def test_workspace_that_is_home_is_refused(workdir: Path) -> None:
    require_backend("bwrap")
    box = make_box(workdir, "bwrap")
    env = {**box.env, "HOME": str(box.ws)}
    done = subprocess.run(
        [KEEL, "exec", "--workspace", str(box.ws), "--", "/bin/true"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 125
    assert "home directory" in done.stderr
    assert os.path.isdir(box.ws)


def test_the_workspaces_own_secret_files_read_as_empty_inside(bwrap_box: Box) -> None:
    box = bwrap_box
    (box.ws / ".env").write_text(f"TOKEN={SECRET}\n")
    (box.ws / "sub").mkdir()
    (box.ws / "sub" / "deploy.pem").write_text(f"{SECRET} key\n")
    (box.ws / ".env.example").write_text("TOKEN=changeme\n")
    script = (
        "cat .env sub/deploy.pem; "
        "python3 -c \"import pathlib; print(pathlib.Path('.e' + 'nv').read_text())\"; "
        "cat .env.example"
    )
    done = box.sh(script)
    assert SECRET not in done.stdout + done.stderr
    assert "TOKEN=changeme" in done.stdout  # not a secret: visible
    assert (box.ws / ".env").read_text() == f"TOKEN={SECRET}\n"  # untouched on the host


def test_show_secrets_lets_a_named_secret_file_through(bwrap_box: Box) -> None:
    box = bwrap_box
    box.config('[sandbox]\nshow_secrets = ["tests/.env.test"]\n')
    (box.ws / "tests").mkdir()
    (box.ws / "tests" / ".env.test").write_text("DB=sqlite\n")
    (box.ws / ".env").write_text(f"TOKEN={SECRET}\n")
    done = box.sh("cat tests/.env.test .env")
    assert "DB=sqlite" in done.stdout and SECRET not in done.stdout
