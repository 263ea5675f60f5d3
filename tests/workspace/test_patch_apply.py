"""Atomic patch application: injected failures, read-only files, policy, races."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from patch_helpers import codex_patch, fails, make_files, snapshot

from keel.core.decision import Decision
from keel.core.errors import KeelError, PatchError
from keel.workspace import _atomic
from keel.workspace import patch as patch_mod
from keel.workspace.patch import apply_patch, parse_patch

TreeReader = Callable[[Path], dict[str, bytes | str]]

MULTI = """*** Begin Patch
*** Add File: new/one.txt
+one
*** Update File: a.txt
@@
-a
+A
*** Update File: b.txt
@@
-b
+B
*** Delete File: c.txt
*** Update File: d.txt
*** Move to: moved/d.txt
@@
-d
+D
*** End Patch
"""


def make_tree(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name in "abcd":
        (root / f"{name}.txt").write_text(f"{name}\n")


def test_multi_file_patch_applies(tree: TreeReader, workdir: Path) -> None:
    make_tree(workdir)
    result = apply_patch(workdir, MULTI)
    assert result.format == "codex"
    assert tree(workdir) == {
        "a.txt": b"A\n",
        "b.txt": b"B\n",
        "moved/d.txt": b"D\n",
        "new/one.txt": b"one\n",
    }


@pytest.mark.parametrize(
    ("where", "nth"),
    [("_write_temp", n) for n in range(1, 5)] + [("_replace", n) for n in range(1, 7)],
)
def test_injected_failure_at_nth_write_leaves_tree_identical(
    tree: TreeReader, workdir: Path, monkeypatch: pytest.MonkeyPatch, where: str, nth: int
) -> None:
    make_tree(workdir)
    before = tree(workdir)
    real = getattr(_atomic, where)
    calls = {"n": 0}

    def failing(*args: object) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            raise OSError(
                28, "No space left on device", str(args[-2] if where == "_write_temp" else args[1])
            )
        real(*args)

    monkeypatch.setattr(_atomic, where, failing)
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, MULTI)
    assert info.value.code == "patch.write_failed"
    assert "No space left" in info.value.message
    assert tree(workdir) == before
    assert sorted(p.relative_to(workdir).as_posix() for p in workdir.rglob("*")) == sorted(before)


def test_read_only_file_is_refused(tree: TreeReader, workdir: Path) -> None:
    make_tree(workdir)
    (workdir / "b.txt").chmod(0o444)
    before = tree(workdir)
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, MULTI)
    assert info.value.code == "patch.read_only"
    assert "b.txt" in info.value.message
    assert tree(workdir) == before


def test_mode_is_kept(workdir: Path) -> None:
    make_tree(workdir)
    (workdir / "a.txt").chmod(0o750)
    apply_patch(workdir, MULTI)
    assert (workdir / "a.txt").stat().st_mode & 0o777 == 0o750


def test_offset_is_reported(workdir: Path) -> None:
    (workdir / "f.txt").write_text("".join(f"{i}\n" for i in range(30)))
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -2,3 +2,3 @@\n 20\n-21\n+twenty-one\n 22\n"
    result = apply_patch(workdir, patch)
    assert result.files[0].offsets == (19,)
    assert "twenty-one\n22\n" in (workdir / "f.txt").read_text()


def test_nearest_match_wins_for_repeated_context(workdir: Path) -> None:
    (workdir / "f.txt").write_text("x\ny\nx\ny\nx\ny\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -5,2 +5,2 @@\n x\n-y\n+Y\n"
    apply_patch(workdir, patch)
    assert (workdir / "f.txt").read_text() == "x\ny\nx\ny\nx\nY\n"


class DenyPolicy:
    """A real PathPolicy implementation that protects one path."""

    def __init__(self, protected: str) -> None:
        self.protected = protected

    def check_path(self, path: str, op: Literal["read", "write", "edit"]) -> Decision:
        if path == self.protected:
            return Decision.deny("path.protected", f"{path} is protected")
        return Decision.allow("test.allow", "ok")


def test_policy_denial_names_rule_and_writes_nothing(tree: TreeReader, workdir: Path) -> None:
    make_tree(workdir)
    before = tree(workdir)
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, MULTI, policy=DenyPolicy("moved/d.txt"))
    assert info.value.code == "patch.denied"
    assert "path.protected" in info.value.message
    assert tree(workdir) == before


def test_real_policy_refuses_protected_path(workdir: Path) -> None:
    from keel.config import config_for
    from keel.policy import Policy

    policy = Policy.from_config(config_for(workdir), workdir)
    (workdir / ".env").write_text("SECRET=1\n")
    patch = "*** Begin Patch\n*** Update File: .env\n@@\n-SECRET=1\n+SECRET=2\n*** End Patch\n"
    assert not policy.check_path(".env", "edit").allowed
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, patch, policy=policy)
    assert info.value.code == "patch.denied"
    assert (workdir / ".env").read_text() == "SECRET=1\n"


def test_broken_policy_fails_closed(workdir: Path) -> None:
    class Broken:
        def check_path(self, path: str, op: Literal["read", "write", "edit"]) -> Decision:
            raise RuntimeError("boom")

    make_tree(workdir)
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, MULTI, policy=Broken())
    assert info.value.code == "patch.denied"


def test_file_changed_during_apply_is_detected(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keel.workspace import patch as patch_mod

    make_tree(workdir)
    real = patch_mod._Plan.unchanged_on_disk

    def racing(self: patch_mod._Plan) -> list[str]:
        (workdir / "a.txt").write_text("someone else\n")
        return real(self)

    monkeypatch.setattr(patch_mod._Plan, "unchanged_on_disk", racing)
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, MULTI)
    assert info.value.code == "patch.conflict"
    assert (workdir / "a.txt").read_text() == "someone else\n"
    assert (workdir / "b.txt").read_text() == "b\n"


def test_absolute_path_inside_workspace_is_accepted(workdir: Path) -> None:
    (workdir / "a.txt").write_text("a\n")
    patch = f"*** Begin Patch\n*** Update File: {workdir}/a.txt\n@@\n-a\n+A\n*** End Patch\n"
    apply_patch(workdir, patch)
    assert (workdir / "a.txt").read_text() == "A\n"


def test_non_utf8_bytes_round_trip(workdir: Path) -> None:
    (workdir / "l1.txt").write_bytes(b"caf\xe9\nline\n")
    patch = "--- a/l1.txt\n+++ b/l1.txt\n@@ -1,2 +1,2 @@\n caf\udce9\n-line\n+LINE\n"
    apply_patch(workdir, patch)
    assert (workdir / "l1.txt").read_bytes() == b"caf\xe9\nLINE\n"


def test_parse_reports_line_numbers() -> None:
    with pytest.raises(PatchError) as info:
        parse_patch("*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n")
    assert info.value.message.startswith("line 2:")


def test_patch_with_checkpoints_is_undoable(tree: TreeReader, workdir: Path) -> None:
    from keel.workspace import Checkpoints

    make_tree(workdir)
    before = tree(workdir)
    cps = Checkpoints(workdir)
    result = apply_patch(workdir, MULTI, checkpoints=cps)
    assert result.checkpoint is not None
    target = cps.get(result.checkpoint)
    cps.rollback(target)
    assert tree(workdir) == before
    assert not os.path.exists(workdir / "moved")


def test_multi_patch_makes_the_writes_the_injection_test_counts(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(workdir)
    counts = {"_write_temp": 0, "_replace": 0}
    for name in counts:
        real = getattr(_atomic, name)

        def counting(*args: object, _real: object = real, _name: str = name) -> None:
            counts[_name] += 1
            _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(_atomic, name, counting)
    apply_patch(workdir, MULTI)
    assert counts == {"_write_temp": 4, "_replace": 6}


# -- the policy: asked about every path, and obeyed ------------------------------------------------


class _Recorder:
    """A PathPolicy that allows everything but ``deny`` and records what it was asked."""

    def __init__(self, deny: str = "") -> None:
        self.deny = deny
        self.asked: list[tuple[str, str]] = []

    def check_path(self, path: str, op: Literal["read", "write", "edit"]) -> Decision:
        self.asked.append((path, op))
        if path == self.deny:
            return Decision.deny("path.protected", f"{path} is protected")
        if path.startswith("ask"):
            return Decision.ask("path.ask", "confirm")
        return Decision.allow("test.allow", "ok")


def test_the_policy_is_asked_about_every_path_with_its_operation(workdir: Path) -> None:
    make_files(workdir, {"a.txt": "a\n", "b.txt": "b\n", "d.txt": "d\n"})
    policy = _Recorder()
    text = codex_patch(
        "*** Update File: ./a.txt",
        "-a",
        "+A",
        "*** Update File: b.txt",
        "*** Move to: sub/b.txt",
        "*** Delete File: d.txt",
        "*** Add File: n.txt",
        "+n",
    )
    apply_patch(workdir, text, policy=policy)
    assert policy.asked == [
        ("a.txt", "edit"),
        ("b.txt", "write"),
        ("sub/b.txt", "write"),
        ("d.txt", "write"),
        ("n.txt", "write"),
    ]


@pytest.mark.parametrize(
    ("deny", "text", "message", "context"),
    [
        (
            "sub/b.txt",
            codex_patch("*** Update File: b.txt", "*** Move to: sub/b.txt"),
            "the policy does not allow write on 'sub/b.txt': sub/b.txt is protected "
            "[path.protected]",
            {"path": "sub/b.txt", "rule": "path.protected"},
        ),
        (
            "a.txt",
            codex_patch("*** Update File: a.txt", "-a", "+A"),
            "the policy does not allow edit on 'a.txt': a.txt is protected [path.protected]",
            {"path": "a.txt", "rule": "path.protected"},
        ),
        (
            "",
            codex_patch("*** Add File: ask.txt", "+x"),
            "the policy does not allow write on 'ask.txt': confirm [path.ask]",
            {"path": "ask.txt", "rule": "path.ask"},
        ),
    ],
)
def test_a_path_the_policy_does_not_allow_stops_the_patch(
    workdir: Path, deny: str, text: str, message: str, context: dict[str, Any]
) -> None:
    err = fails(workdir, {"a.txt": "a\n", "b.txt": "b\n"}, text, policy=_Recorder(deny))
    assert (err.code, err.message, err.context) == ("patch.denied", message, context)


def test_a_policy_that_breaks_denies_and_a_keel_error_passes_through(workdir: Path) -> None:
    class Broken:
        def __init__(self, exc: Exception) -> None:
            self.exc = exc

        def check_path(self, path: str, op: Literal["read", "write", "edit"]) -> Decision:
            raise self.exc

    text = codex_patch("*** Update File: a.txt", "-a", "+A")
    err = fails(workdir, {"a.txt": "a\n"}, text, policy=Broken(RuntimeError("boom")))
    assert (err.code, err.message, err.context) == (
        "patch.denied",
        "the policy could not judge 'a.txt': boom",
        {"path": "a.txt"},
    )
    assert isinstance(err.__cause__, RuntimeError)
    own = PatchError("config broke", code="patch.custom")
    assert fails(workdir, {}, text, policy=Broken(own)) is own
    other = KeelError("k", code="keel.other")
    with pytest.raises(KeelError) as info:
        apply_patch(workdir, text, policy=Broken(other))
    assert info.value is other and (workdir / "a.txt").read_text() == "a\n"


# -- modes, read-only files, races, write failures -------------------------------------------------


def test_modes_are_kept_through_updates_and_moves(workdir: Path) -> None:
    make_files(workdir, {"x.sh": "a\n", "y.sh": "b\n"})
    (workdir / "x.sh").chmod(0o751)
    (workdir / "y.sh").chmod(0o700)
    text = codex_patch(
        "*** Update File: x.sh", "-a", "+A", "*** Update File: y.sh", "*** Move to: d/z.sh"
    )
    apply_patch(workdir, text)
    assert snapshot(workdir) == {
        "d": ("dir", "", 0o755),
        "d/z.sh": ("file", b"b\n", 0o700),
        "x.sh": ("file", b"A\n", 0o751),
    }


@pytest.mark.parametrize(
    ("mode", "text", "ok"),
    [
        (0o444, codex_patch("*** Update File: r", "-r", "+R"), False),
        (0o400, codex_patch("*** Delete File: r"), False),
        (0o440, codex_patch("*** Update File: r", "*** Move to: s"), False),
        (0o555, codex_patch("*** Update File: r", "-r", "+R"), False),
        (0o644, codex_patch("*** Update File: r", "-r", "+R"), True),
        (0o200, codex_patch("*** Update File: r", "-r", "+R"), True),
        (0o020, codex_patch("*** Delete File: r"), True),
        (0o402, codex_patch("*** Update File: r", "*** Move to: s"), True),
    ],
)
def test_a_read_only_file_is_refused(workdir: Path, mode: int, text: str, ok: bool) -> None:
    make_files(workdir, {"r": "r\n"})
    (workdir / "r").chmod(mode)
    if ok:
        before = snapshot(workdir)
        assert apply_patch(workdir, text).applied
        assert snapshot(workdir) != before
        return
    err = fails(workdir, {}, text)
    assert (err.code, err.message, err.context) == (
        "patch.read_only",
        f"'r' is read-only (mode {mode:o}); make it writable first",
        {"path": "r"},
    )


def test_a_file_changed_after_the_check_stops_the_patch(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_files(workdir, {"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
    real = patch_mod._Plan.unchanged_on_disk

    def racing(self: patch_mod._Plan) -> list[str]:
        (workdir / "c.txt").write_text("changed\n")
        (workdir / "b.txt").unlink()
        (workdir / "n.txt").write_text("appeared\n")
        return real(self)

    monkeypatch.setattr(patch_mod._Plan, "unchanged_on_disk", racing)
    text = codex_patch(
        "*** Update File: a.txt",
        "-a",
        "+A",
        "*** Update File: c.txt",
        "-c",
        "+C",
        "*** Delete File: b.txt",
        "*** Add File: n.txt",
        "+n",
    )
    with pytest.raises(PatchError) as info:
        apply_patch(workdir, text)
    err = info.value
    assert (err.code, err.message, err.context) == (
        "patch.conflict",
        "files changed on disk while the patch was checked: b.txt, c.txt, n.txt",
        {"files": ["b.txt", "c.txt", "n.txt"]},
    )
    assert (workdir / "a.txt").read_text() == "a\n"
    assert (workdir / "c.txt").read_text() == "changed\n"


def test_an_unreadable_file_counts_as_changed(workdir: Path) -> None:
    make_files(workdir, {"a.txt": "a\n"})
    plan = patch_mod._Plan(workdir)
    assert plan.read("a.txt") == b"a\n" and plan.read("n.txt") is None
    assert plan.unchanged_on_disk() == []
    (workdir / "a.txt").unlink()
    (workdir / "a.txt").mkdir()  # reading it now fails with IsADirectoryError
    assert plan.unchanged_on_disk() == ["a.txt"]
    (workdir / "n.txt").mkdir()  # where nothing was, something unreadable is a change too
    assert plan.unchanged_on_disk() == ["a.txt", "n.txt"]


@pytest.mark.parametrize("content", [b"XX\0unreadableXX", b"\0UNREADABLE", b"\0unreadable!"])
def test_a_file_that_became_unreadable_counts_as_changed_whatever_it_held(
    workdir: Path, content: bytes
) -> None:
    make_files(workdir, {"a.bin": content})
    plan = patch_mod._Plan(workdir)
    assert plan.read("a.bin") == content
    (workdir / "a.bin").unlink()
    (workdir / "a.bin").mkdir()  # reading it now fails with IsADirectoryError
    assert plan.unchanged_on_disk() == ["a.bin"]


def test_a_write_failure_is_a_patch_error_that_keeps_its_context(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keel.workspace import _atomic

    make_files(workdir, {"a.txt": "a\n"})

    def full(path: Path, data: bytes, mode: int) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(_atomic, "_write_temp", full)
    err = fails(workdir, {}, codex_patch("*** Update File: a.txt", "-a", "+A"))
    assert err.code == "patch.write_failed"
    assert err.message.startswith(f"could not write {workdir}/.a.txt.keel-tmp-")
    assert err.message.endswith(": No space left on device; no file was changed")
    assert err.context["path"].startswith(f"{workdir}/.a.txt.keel-tmp-")
    assert err.__cause__ is not None and err.__cause__.__class__.__name__ == "WorkspaceError"
