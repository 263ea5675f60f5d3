"""keel exec, by effect: control files stay as they were; planted ones are quarantined."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from exec_helpers import Box, git, journal_events, snapshot

from keel.sandbox.exec._control import ControlRules, scan_controls


def _repo(box: Box) -> list[Path]:
    """A repository with every kind of control file; returns the paths to watch."""
    ws = box.ws
    git(ws, "init", "-q", ".")
    (ws / "sub").mkdir()
    git(ws / "sub", "init", "-q", ".")
    box.config('[policy]\npreset = "developer"\n')
    (ws / ".keel").mkdir(exist_ok=True)
    (ws / ".keel" / "journal.db").write_bytes(b"journal")
    (ws / ".claude").mkdir()
    (ws / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    (ws / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (ws / ".github" / "workflows").mkdir(parents=True)
    (ws / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (ws / ".pre-commit-config.yaml").write_text("repos: []\n")
    return [
        ws / "keel.toml",
        ws / ".keel" / "journal.db",
        ws / ".claude",
        ws / ".git" / "hooks",
        ws / ".git" / "config",
        ws / "sub" / ".git" / "config",
        ws / "sub" / ".git" / "hooks",
        ws / ".github" / "workflows",
        ws / ".pre-commit-config.yaml",
    ]


_ATTACKS = {
    "write": "echo '[core]' >> {p} || echo evil > {p}/evil",
    "truncate": ": > {p} || truncate -s0 {p}",
    "rm": "rm -rf {p}",
    "mv over": "echo evil > /tmp/x && mv -f /tmp/x {p}",
    "mv away": "mv {p} {p}.away",
    "chmod": "chmod -R 777 {p}",
    "symlink swap": "rm -rf {p} && ln -s /etc/passwd {p}",
}


@pytest.mark.parametrize("attack", sorted(_ATTACKS))
def test_control_files_are_byte_identical_after_attacks(box: Box, attack: str) -> None:
    watched = _repo(box)
    before = snapshot(watched)
    script = "; ".join(_ATTACKS[attack].format(p=p) for p in watched)
    done = box.sh(script + "; git config core.fsmonitor evil; git -C sub config core.pager evil")
    # keel journals the run once it is over: the planted "journal" is unreadable, so keel
    # moves it aside, as it was, and starts a new one
    journal_events(box, "exec", 1)
    after = snapshot(watched)
    journal = str(box.ws / ".keel" / "journal.db")
    planted, _ = before.pop(journal), after.pop(journal)
    [aside] = (box.ws / ".keel").glob("journal.broken-*.db")
    kept = (aside.lstat().st_mode, aside.read_bytes())
    if box.backend == "landlock" and attack == "chmod":
        # Documented gap: Landlock does not govern modes, and .keel/ is not restored.
        assert kept[1] == planted[1]
    else:
        assert kept == planted
    assert after == before, done.stderr
    assert "evil" not in git(box.ws, "config", "--list")


def test_renaming_a_git_directory_away_is_refused(bwrap_box: Box) -> None:
    _repo(bwrap_box)
    done = bwrap_box.sh("mv .git g2 && echo moved")
    assert "moved" not in done.stdout
    assert (bwrap_box.ws / ".git" / "config").is_file()


@pytest.mark.parametrize(
    ("script", "planted"),
    [
        ("echo '[policy]' > keel.toml", "keel.toml"),
        # a new repository's .git is a control file as a whole (an existing one is read-only)
        ("mkdir -p pkg/.git/hooks && echo x > pkg/.git/hooks/pre-commit", "pkg/.git"),
        ("mkdir -p deep/a/.git/hooks && echo x > deep/a/.git/hooks/post-checkout",
         "deep/a/.git"),
        ("mkdir -p pkg/.claude && echo '{}' > pkg/.claude/settings.json", "pkg/.claude"),
        ("mkdir -p .github/workflows && echo on: push > .github/workflows/x.yml",
         ".github/workflows"),
        ("echo 'gitdir: /tmp' > lib/.git", "lib/.git"),
    ],
)  # fmt: skip
def test_new_control_files_are_quarantined(box: Box, script: str, planted: str) -> None:
    ws = box.ws
    git(ws, "init", "-q", ".")
    (ws / "sub").mkdir()
    git(ws / "sub", "init", "-q", ".")
    for hooks in (ws / ".git" / "hooks", ws / "sub" / ".git" / "hooks"):
        subprocess.run(["rm", "-rf", str(hooks)], check=True)
    for parent in ("lib", "pkg", "deep", ".github"):
        (ws / parent).mkdir()
    done = box.sh(script)
    if box.backend == "landlock" and "/" not in planted:
        # Landlock cannot let a command create entries in the workspace root at all.
        assert not (ws / planted).exists()
        return
    if done.returncode == 0 or not (ws / planted).parent.exists():
        assert not (ws / planted).exists(), done.stderr
    quarantined = list((ws / ".keel" / "quarantine").rglob(Path(planted).name))
    assert quarantined, done.stderr
    assert done.returncode == 123, done.stderr
    assert "quarantine" in done.stderr and planted.split("/")[0] in done.stderr


def test_a_failing_command_keeps_its_exit_code_when_it_planted_something(box: Box) -> None:
    git(box.ws, "init", "-q", ".")
    (box.ws / "pkg").mkdir()
    done = box.sh("mkdir -p pkg/.codex && echo x > pkg/.codex/config.toml; exit 3")
    assert done.returncode == 3
    assert not (box.ws / "pkg" / ".codex").exists()


def test_git_status_and_commit_work_inside(box: Box) -> None:
    git(box.ws, "init", "-q", ".")
    (box.ws / ".gitignore").write_text(".keel/\n")  # what keel init writes
    (box.ws / "src").mkdir()
    (box.ws / "src" / "a.py").write_text("print(1)\n")
    hooks = snapshot([box.ws / ".git" / "hooks", box.ws / ".git" / "config"])
    done = box.sh(
        "git status --short && git add -A && git commit -qm contained && git log -1 --format=%s"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("contained")
    assert git(box.ws, "log", "-1", "--format=%an").strip() == "Box Tester"
    assert snapshot([box.ws / ".git" / "hooks", box.ws / ".git" / "config"]) == hooks


def test_read_only_globs_from_keel_toml_are_kept(box: Box) -> None:
    (box.ws / "docs").mkdir()
    (box.ws / "docs" / "spec.md").write_text("spec\n")
    box.config('[sandbox]\nread_only = ["docs/**"]\n')
    done = box.sh("echo changed > docs/spec.md; echo new > docs/new.md; rm -f docs/spec.md")
    assert (box.ws / "docs" / "spec.md").read_text() == "spec\n"
    assert not (box.ws / "docs" / "new.md").exists(), done.stderr


def test_ci_files_can_be_left_writable(box: Box) -> None:
    (box.ws / "cfg").mkdir()
    (box.ws / "cfg" / ".pre-commit-config.yaml").write_text("repos: []\n")
    box.config("[sandbox]\nprotect_ci = false\n")
    done = box.sh("echo changed > cfg/.pre-commit-config.yaml")
    assert done.returncode == 0, done.stderr
    assert (box.ws / "cfg" / ".pre-commit-config.yaml").read_text() == "changed\n"


def test_control_files_below_the_depth_bound_are_found_but_not_mounted(workdir: Path) -> None:
    """The walk has no depth bound; ``control_depth`` bounds only what is mounted read-only."""
    deep = workdir / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "keel.toml").write_text("")
    within = scan_controls(str(workdir), ControlRules(3, True), keep_fds=True)
    below = scan_controls(str(workdir), ControlRules(2, True), keep_fds=True)
    try:
        assert "a/b/c/keel.toml" in within.fds and "a/b/c/keel.toml" not in within.deep
        assert "a/b/c/keel.toml" in below.controls and "a/b/c/keel.toml" in below.deep
        assert "a/b/c/keel.toml" not in below.fds
    finally:
        within.close()
        below.close()


def test_the_scan_never_follows_symlinks(workdir: Path) -> None:
    outside = workdir / "outside"
    (outside / ".git" / "hooks").mkdir(parents=True)
    ws = workdir / "ws"
    ws.mkdir()
    (ws / "link").symlink_to(outside)
    (ws / "keel.toml").symlink_to("/etc/passwd")
    scan = scan_controls(str(ws), ControlRules(6, True), keep_fds=True)
    try:
        assert set(scan.controls) == {"keel.toml"}
        assert scan.controls["keel.toml"].kind == "link"
        assert scan.fds == {}
    finally:
        scan.close()
