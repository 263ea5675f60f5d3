"""Checkpoints and rollback with real git, real files and real shell commands."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from checkpoint_helpers import agent_call, seed

from keel.core.errors import UserError, WorkspaceError
from keel.journal import MemoryJournal
from keel.workspace import Checkpoints

TreeReader = Callable[[Path], dict[str, bytes | str]]
Git = Callable[..., str]


def sh(root: Path, script: str) -> None:
    """An agent-style change made by a shell command."""
    subprocess.run(["sh", "-c", script], cwd=root, check=True)


def git_fingerprint(root: Path) -> dict[str, str]:
    """A hash of every file under .git (refs, index, stash, HEAD, hooks, objects)."""
    out: dict[str, str] = {}
    for path in sorted((root / ".git").rglob("*")):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def repo(workdir: Path, user_git: Git) -> Path:
    """A user's git repository with history, a stash, a hook, and a dirty index."""
    root = workdir / "repo"
    root.mkdir()
    seed(root)
    user_git(root, "init", "-q", "-b", "main")
    user_git(root, "add", "-A")
    user_git(root, "commit", "-q", "-m", "initial")
    (root / "README.md").write_text("# project\nstashed change\n")
    user_git(root, "stash", "-q")
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {workdir}/HOOK-RAN\n")
    hook.chmod(0o755)
    (root / "notes.txt").write_text("keep\nstaged by the user\n")
    user_git(root, "add", "notes.txt")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    return root


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_round_trip_of_shell_command_changes(
    kind: str, repo: Path, workdir: Path, tree: TreeReader
) -> None:
    root = repo if kind == "git" else workdir / "plain"
    if kind == "plain":
        root.mkdir()
        seed(root)
    fingerprint = git_fingerprint(root) if kind == "git" else {}
    before = tree(root)
    cps = Checkpoints(root)
    agent_call(
        cps,
        "s1",
        "t1",
        lambda: sh(
            root,
            "echo changed >> src/app.py; rm README.md; mkdir -p pkg/sub; echo new > pkg/sub/m.py;"
            " mv notes.txt notes-renamed.txt; chmod -x run.sh",
        ),
    )
    diff = cps.diff(cps.resolve(session_id="s1"))
    statuses = {c.path: c.status for c in diff.changes}
    assert statuses["src/app.py"] == "modified"
    assert statuses["README.md"] == "deleted"
    assert statuses["pkg/sub/m.py"] == "added"
    assert statuses["notes-renamed.txt"] == "renamed"
    assert "notes.txt" not in statuses
    [renamed] = [c for c in diff.changes if c.status == "renamed"]
    assert renamed.old_path == "notes.txt"
    assert "+changed" in diff.patch
    result = cps.rollback(cps.resolve(session_id="s1"))
    assert tree(root) == before
    assert not (root / "pkg").exists()
    assert os.access(root / "run.sh", os.X_OK)
    assert "pkg/sub/m.py" in result.deleted
    assert set(result.restored) >= {"src/app.py", "README.md", "notes.txt", "run.sh"}
    if kind == "git":
        assert git_fingerprint(root) == fingerprint
        assert not (workdir / "HOOK-RAN").exists()


def test_users_git_is_untouched(repo: Path, workdir: Path, user_git: Git) -> None:
    fingerprint = git_fingerprint(repo)
    status = user_git(repo, "--no-optional-locks", "status", "--porcelain")
    stash = user_git(repo, "stash", "list")
    cps = Checkpoints(repo)
    cp = cps.create(label="by hand")
    agent_call(cps, "s1", "t1", lambda: sh(repo, "echo x > src/app.py; echo y > notes.txt"))
    first = cps.rollback(cp)
    assert user_git(repo, "--no-optional-locks", "status", "--porcelain") == status
    cps.rollback(first.undo)
    cps.rollback(cps.resolve(last=True))
    assert git_fingerprint(repo) == fingerprint
    assert user_git(repo, "--no-optional-locks", "status", "--porcelain") == status
    assert user_git(repo, "stash", "list") == stash
    assert not (workdir / "HOOK-RAN").exists()
    assert not list((repo / ".git").glob("refs/keel*"))


def test_gitignore_keel_dir_and_size_cap(workdir: Path) -> None:
    root = workdir / "ws"
    root.mkdir()
    (root / ".gitignore").write_text("*.log\n")
    (root / "app.log").write_text("noise\n")
    (root / "big.bin").write_bytes(b"x" * 2048)
    (root / "small.txt").write_text("s\n")
    cps = Checkpoints(root, max_file_bytes=1024)
    cp = cps.create()
    assert cp.skipped == ("big.bin",)
    listed = cps.git.run("ls-tree", "-r", "--name-only", cp.tree).decode().split()
    assert sorted(listed) == [".gitignore", "small.txt"]
    again = cps.create()
    assert again.reused and again.skipped == ("big.bin",)

    def change() -> None:
        sh(root, "echo more > app.log; head -c 3000 /dev/zero > big.bin; echo t > small.txt")

    agent_call(cps, "s", "t", change)
    cps.rollback(cps.resolve(session_id="s"))
    assert (root / "small.txt").read_text() == "s\n"
    assert (root / "app.log").read_text() == "more\n"  # ignored: never snapshotted, never touched
    assert (root / "big.bin").stat().st_size == 3000  # over the cap: never touched
    agent_call(cps, "s", "t2", lambda: sh(root, "echo small now > big.bin"))
    cps.rollback(cps.history("s")[0])
    assert (root / "big.bin").read_text() == "small now\n"  # no content to go back to: kept


def test_nothing_changed_reuses_the_tree(workdir: Path) -> None:
    seed(workdir)
    cps = Checkpoints(workdir)
    first = cps.create(session_id="s", tool_use_id="a")
    second = cps.create(session_id="s", tool_use_id="b")
    assert second.tree == first.tree
    assert second.reused and second.files == ()
    (workdir / "README.md").write_text("edited\n")
    third = cps.create(session_id="s", tool_use_id="c")
    assert not third.reused
    assert third.files == ("README.md",)
    assert [c.tool_use_id for c in cps.history("s")] == ["a", "b", "c"]
    assert cps.find("s", "b") == cps.history("s")[1]


def test_user_edit_after_agent_is_refused_and_force_overwrites(
    workdir: Path, tree: TreeReader
) -> None:
    seed(workdir)
    cps = Checkpoints(workdir)
    agent_call(
        cps, "s1", "t1", lambda: sh(workdir, "echo agent > README.md; echo agent >> src/app.py")
    )
    (workdir / "README.md").write_text("the user's own work\n")
    current = tree(workdir)
    with pytest.raises(WorkspaceError) as info:
        cps.rollback(cps.resolve(session_id="s1"))
    assert info.value.code == "workspace.user_changes"
    assert "README.md" in info.value.message
    assert "src/app.py" not in info.value.message
    assert info.value.context["files"] == ["README.md"]
    assert tree(workdir) == current
    assert [c.kind for c in cps.history()] == ["before", "after"]
    result = cps.rollback(cps.resolve(session_id="s1"), force=True)
    assert result.overwritten == ("README.md",)
    assert (workdir / "README.md").read_text() == "# project\n"
    undone = cps.rollback(result.undo)  # the user's work comes back
    assert (workdir / "README.md").read_text() == "the user's own work\n"
    assert undone.target == result.undo


def test_user_only_changes_are_kept(workdir: Path) -> None:
    seed(workdir)
    cps = Checkpoints(workdir)
    agent_call(cps, "s1", "t1", lambda: sh(workdir, "echo agent >> src/app.py"))
    (workdir / "notes.txt").write_text("user edit\n")
    (workdir / "mine.txt").write_text("user file\n")
    result = cps.rollback(cps.resolve(session_id="s1"))
    assert result.restored == ("src/app.py",)
    assert result.kept == ("mine.txt", "notes.txt")
    assert (workdir / "notes.txt").read_text() == "user edit\n"
    assert (workdir / "mine.txt").read_text() == "user file\n"


def test_user_edit_before_agent_builds_on_it_is_refused(workdir: Path) -> None:
    seed(workdir)
    cps = Checkpoints(workdir)
    agent_call(cps, "s1", "t1", lambda: sh(workdir, "echo 1 >> src/app.py"))
    (workdir / "README.md").write_text("user\n")
    agent_call(cps, "s1", "t2", lambda: sh(workdir, "echo agent >> README.md"))
    with pytest.raises(WorkspaceError) as info:
        cps.rollback(cps.resolve(session_id="s1"))
    assert info.value.context["files"] == ["README.md"]
    result = cps.rollback(cps.resolve(last=True))  # only the last call: README.md again
    assert (workdir / "README.md").read_text() == "user\n"
    assert result.restored == ("README.md",)


def test_rollback_of_a_rollback(workdir: Path, tree: TreeReader) -> None:
    seed(workdir)
    cps = Checkpoints(workdir)
    original = tree(workdir)
    agent_call(
        cps, "s1", "t1", lambda: sh(workdir, "echo a > new.txt; rm notes.txt; echo b >> README.md")
    )
    changed = tree(workdir)
    first = cps.rollback(cps.resolve(session_id="s1"))
    assert tree(workdir) == original
    second = cps.rollback(first.undo)
    assert tree(workdir) == changed
    third = cps.rollback(cps.resolve(last=True))  # --last after a rollback undoes it again
    assert third.target == second.undo
    assert tree(workdir) == original
    kinds = [c.kind for c in cps.history()]
    assert kinds == ["before", "after"] + ["rollback", "restored"] * 3


def test_renames_type_changes_and_symlinks(workdir: Path, tree: TreeReader) -> None:
    seed(workdir)
    (workdir / "link").symlink_to("README.md")
    (workdir / "thing").write_text("a file\n")
    cps = Checkpoints(workdir)
    before = tree(workdir)
    agent_call(
        cps,
        "s",
        "t",
        lambda: sh(
            workdir,
            "git mv 2>/dev/null; mv src lib; rm thing; mkdir thing; echo x > thing/inside;"
            " rm link; ln -s notes.txt link",
        ),
    )
    cps.rollback(cps.resolve(session_id="s"))
    assert tree(workdir) == before
    assert (workdir / "link").is_symlink()
    assert not (workdir / "lib").exists()


def test_journal_events(workdir: Path) -> None:
    seed(workdir)
    journal = MemoryJournal()
    cps = Checkpoints(workdir, journal)
    agent_call(cps, "s1", "tool-1", lambda: sh(workdir, "echo x >> README.md"))
    result = cps.rollback(cps.resolve(session_id="s1"))
    events = list(journal.events())
    assert [e.kind for e in events] == ["checkpoint", "checkpoint", "rollback"]
    before, after, rollback = events
    assert all(e.session_id == "s1" for e in events)
    assert before.payload.tool_use_id == "tool-1"
    assert before.payload.checkpoint_id == result.target.short
    assert before.payload.detail["kind"] == "before"
    assert after.payload.files == ["README.md"]
    assert rollback.payload.files == ["README.md"]
    assert rollback.payload.detail["undo"] == result.undo.short
    manual = Checkpoints(workdir, journal).create(label="mine")
    last = list(journal.events())[-1]
    assert last.session_id == "manual"
    assert last.payload.label == "mine"
    assert last.payload.checkpoint_id == manual.short


def test_interleaved_sessions_roll_back_only_their_own(workdir: Path) -> None:
    seed(workdir)
    cps = Checkpoints(workdir)
    for i in range(3):
        for name in ("s0", "s1"):
            script = f"echo x > {name}-{i}.txt"
            agent_call(cps, name, f"{name}-{i}", lambda s=script: sh(workdir, s))
    result = cps.rollback(cps.resolve(session_id="s0"))
    assert result.deleted == ("s0-0.txt", "s0-1.txt", "s0-2.txt")
    assert result.kept == ("s1-0.txt", "s1-1.txt", "s1-2.txt")
    assert all((workdir / f"s1-{i}.txt").exists() for i in range(3))


def test_concurrent_sessions(workdir: Path) -> None:
    seed(workdir)
    errors: list[BaseException] = []

    def session(name: str) -> None:
        try:
            cps = Checkpoints(workdir)
            for i in range(8):
                path = workdir / f"{name}-{i}.txt"
                agent_call(cps, name, f"{name}-{i}", lambda p=path: p.write_text("x\n"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(f"s{n}",)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    cps = Checkpoints(workdir)
    assert len(cps.history()) == 3 * 8 * 2
    for n in range(3):
        assert [c.kind for c in cps.history(f"s{n}")] == ["before", "after"] * 8
    # overlapping calls cannot be told apart: keel refuses rather than guess, or (when the
    # calls did not overlap) removes exactly s0's files; never another session's.
    try:
        result = cps.rollback(cps.resolve(session_id="s0"))
    except WorkspaceError as exc:
        assert exc.code == "workspace.user_changes"
    else:
        assert set(result.deleted) == {f"s0-{i}.txt" for i in range(8)}
    assert all((workdir / f"s{n}-{i}.txt").exists() for n in (1, 2) for i in range(8))


def test_concurrent_processes(workdir: Path) -> None:
    seed(workdir)
    script = (
        "import sys; from pathlib import Path; from keel.workspace import Checkpoints\n"
        "c = Checkpoints(Path(sys.argv[1]))\n"
        "for i in range(5): c.create(session_id=sys.argv[2], tool_use_id=str(i))\n"
    )
    procs = [
        subprocess.Popen([os.sys.executable, "-c", script, str(workdir), f"p{n}"]) for n in range(3)
    ]
    assert [p.wait() for p in procs] == [0, 0, 0]
    assert len(Checkpoints(workdir).history()) == 15


def test_resolve_errors(workdir: Path) -> None:
    seed(workdir)
    cps = Checkpoints(workdir)
    with pytest.raises(UserError) as info:
        cps.resolve(last=True)
    assert info.value.code == "workspace.no_checkpoint"
    cp = cps.create()
    assert cps.get(cp.short[:6]) == cp
    for bad, code in (
        ("zz", "workspace.bad_checkpoint_id"),
        ("0000000", "workspace.unknown_checkpoint"),
    ):
        with pytest.raises(UserError) as info:
            cps.get(bad)
        assert info.value.code == code
    with pytest.raises(UserError):
        cps.resolve(session_id="nobody")


def test_outside_scope(workdir: Path) -> None:
    seed(workdir)
    cps = Checkpoints(workdir)
    cp = cps.create(session_id="s", tool_use_id="t")
    sh(workdir, "echo x >> src/app.py; echo y > README.md; mkdir docs; echo z > docs/a.md")
    result = cps.diff(cp, in_scope=lambda p: p.startswith("src/"))
    assert result.outside_scope == ("README.md", "docs/a.md")


def test_hostile_git_environment_is_ignored(
    repo: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fingerprint = git_fingerprint(repo)
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(workdir))
    home = workdir / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\thooksPath = /nonexistent\n\tautocrlf = true\n")
    monkeypatch.setenv("HOME", str(home))
    cps = Checkpoints(repo)
    agent_call(cps, "s", "t", lambda: sh(repo, "printf 'a\\r\\nb\\r\\n' > crlf.txt"))
    cps.rollback(cps.resolve(session_id="s"))
    assert not (repo / "crlf.txt").exists()
    assert git_fingerprint(repo) == fingerprint


def test_read_only_restore_target_and_failure_is_atomic(
    workdir: Path, tree: TreeReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keel.workspace import _atomic

    seed(workdir)
    cps = Checkpoints(workdir)
    agent_call(
        cps,
        "s",
        "t",
        lambda: sh(workdir, "echo 1 >> README.md; echo 2 >> notes.txt; echo 3 > n.txt"),
    )
    changed = tree(workdir)
    calls = {"n": 0}
    real = _atomic._replace

    def fail_second(src: Path, dst: Path) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(5, "Input/output error", str(dst))
        real(src, dst)

    monkeypatch.setattr(_atomic, "_replace", fail_second)
    with pytest.raises(WorkspaceError) as info:
        cps.rollback(cps.resolve(session_id="s"))
    assert info.value.code == "workspace.write_failed"
    assert tree(workdir) == changed
    assert [c.kind for c in cps.history()] == ["before", "after"]


def test_large_files_with_odd_names(workdir: Path) -> None:
    names = ["big *.bin", "big [1].bin", "trailing ", "back\\slash", "#hash", "!bang"]
    for name in names:
        (workdir / name).write_bytes(b"x" * 300)
    (workdir / "ok.txt").write_text("ok\n")
    cps = Checkpoints(workdir, max_file_bytes=100)
    first = cps.create()
    assert sorted(first.skipped) == sorted(names)
    second = cps.create()
    assert second.reused and sorted(second.skipped) == sorted(names)
    (workdir / "big [1].bin").write_bytes(b"small")
    third = cps.create()
    assert "big [1].bin" in third.files and "big [1].bin" not in third.skipped


def test_a_large_non_ascii_file_under_an_ascii_locale(workdir: Path) -> None:
    """keel run by a host program with the C locale (file names are then ASCII + escapes):
    the list of large files it wrote is read back the same way, not crashed on."""
    import sys

    (workdir / "caf\u00e9.bin").write_bytes(b"x" * 500)
    script = (
        "import sys; from pathlib import Path; from keel.workspace import Checkpoints\n"
        "c = Checkpoints(Path(sys.argv[1]), max_file_bytes=100)\n"
        "print([c.create().skipped, c.create().skipped], sys.getfilesystemencoding())\n"
    )
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(workdir)],
        env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "[('caf\\udcc3\\udca9.bin',),", "('caf\\udcc3\\udca9.bin',)]", "ascii"
    ]  # fmt: skip


def test_first_snapshot_of_a_large_tree(workdir: Path, tree: TreeReader) -> None:
    for i in range(260):
        sub = workdir / f"d{i % 7}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}.txt").write_text(f"file {i}\n")
    odd = ["new\nline.txt", '"quoted".txt', "sp ace.txt", "uni-é.txt"]
    for name in odd:
        (workdir / name).write_text(name)
    (workdir / "exe").write_text("#!/bin/sh\n")
    (workdir / "exe").chmod(0o755)
    (workdir / "ln").symlink_to("exe")
    (workdir / "bin.dat").write_bytes(bytes(range(256)))
    cps = Checkpoints(workdir)
    first = cps.create(session_id="s", tool_use_id="t")
    listing = cps.git.run("ls-tree", "-r", "-z", first.tree).split(b"\0")
    modes = {e.split(b"\t", 1)[1].decode(): e.split()[0].decode() for e in listing if e}
    assert len(modes) == 260 + len(odd) + 3
    assert modes["exe"] == "100755" and modes["ln"] == "120000"
    assert all(name in modes for name in odd)
    assert cps.create().reused
    before = tree(workdir)
    agent_call(cps, "s", "t2", lambda: sh(workdir, "rm -r d3; echo x > 'sp ace.txt'; rm ln"))
    cps.rollback(cps.resolve(last=True))
    assert tree(workdir) == before


def test_rollback_never_writes_through_a_symlinked_directory(
    workdir: Path, tree: TreeReader
) -> None:
    root = workdir / "ws"
    outside = workdir / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "file.txt").write_text("mine\n")
    cps = Checkpoints(root)
    before = tree(root)
    agent_call(cps, "s", "t", lambda: sh(root, f"rm -r a; ln -s {outside} a; mkdir {outside}/b"))
    cps.rollback(cps.resolve(session_id="s"))
    assert tree(root) == before
    assert not (root / "a").is_symlink()
    assert list(outside.rglob("*")) == [outside / "b"]


def test_broken_state_dir_is_a_clear_error(workdir: Path) -> None:
    seed(workdir)
    (workdir / ".keel").write_text("not a directory\n")
    with pytest.raises(WorkspaceError) as info:
        Checkpoints(workdir).create()
    assert info.value.code == "workspace.io"
    assert (workdir / ".keel").read_text() == "not a directory\n"


def test_checkpoint_of_another_workspace_is_refused(workdir: Path) -> None:
    one, two = workdir / "one", workdir / "two"
    for root in (one, two):
        root.mkdir()
        seed(root)
    foreign = Checkpoints(one).create()
    Checkpoints(two).create()
    with pytest.raises(UserError) as info:
        Checkpoints(two).rollback(foreign)
    assert info.value.code == "workspace.unknown_checkpoint"
