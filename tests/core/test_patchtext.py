"""The one reader of patch text, and every place that judges a patch by it."""

from __future__ import annotations

from pathlib import Path

from keel.config import KeelConfig, validate
from keel.core.calls import ToolCall
from keel.core.patchtext import PatchedFile, patch_paths, read_patch
from keel.plan._validate import patch_paths as plan_patch_paths
from keel.policy import Policy

CODEX = (
    "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: src/moved.py\n@@\n-x = 1\n+x = 2\n"
    "*** Add File: src/b.py\n+print(1)\n*** Delete File: src/c.py\n*** End Patch\n"
)
UNIFIED = (
    "diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n"
    "--- a comment\n select 1;\n--- a/old.py\n+++ /dev/null\n"
)
RENAME = "diff --git a/x.py b/y.py\nsimilarity index 90%\nrename from x.py\nrename to y.py\n"


def test_both_dialects_give_files_ops_and_lines() -> None:
    assert read_patch(CODEX) == (
        PatchedFile("src/a.py", "update", "src/moved.py", ("x = 2",), ("x = 1",)),
        PatchedFile("src/b.py", "add", None, ("print(1)",), ()),
        PatchedFile("src/c.py", "delete"),
    )
    got = {f.path: f for f in read_patch(UNIFIED)}
    assert got["q.sql"].removed == ("-- a comment",) and got["q.sql"].op == "update"
    assert got["old.py"].op == "delete"


def test_moves_and_renames_are_paths_too() -> None:
    assert patch_paths(CODEX) == ["src/a.py", "src/moved.py", "src/b.py", "src/c.py"]
    assert patch_paths(RENAME) == ["x.py", "y.py"]


def test_text_that_is_no_patch_names_nothing_and_never_raises() -> None:
    for text in ("", "hello", "+++ b/x", "--- a/x", "*** Move to: y", "\x00" * 10):
        read_patch(text)
    assert patch_paths("just text\n+ a line") == []


def test_the_plan_validator_sees_a_move_target(tmp_path: Path) -> None:
    # its own copy of the reader missed "*** Move to:" (a write the lint never saw)
    assert "src/moved.py" in (plan_patch_paths(CODEX) or [])


def test_the_policy_judges_where_a_patch_moves_a_file(tmp_path: Path) -> None:
    config = validate(KeelConfig, {"scope": {"include": ["src/**"]}})
    policy = Policy.from_config(config, tmp_path)
    inside = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch\n"
    moved_out = inside.replace("@@", "*** Move to: ../outside.py\n@@")
    assert policy.check_call(ToolCall("apply_patch", "edit", patch=inside)).allowed
    denied = policy.check_call(ToolCall("apply_patch", "edit", patch=moved_out))
    assert denied.decision == "deny" and denied.rule.startswith("path.")
