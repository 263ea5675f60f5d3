"""keel.core.errors: one tree of exceptions, each with a stable code, cheap to import."""

from __future__ import annotations

import ast
import builtins
import re
import subprocess
import sys
from pathlib import Path

import pytest

import keel.core.errors as errors
from keel.core.errors import (
    BindError,
    DemoFailed,
    ExecRefused,
    KeelError,
    SandboxError,
    Signal,
    UserError,
    ViewError,
)
from keel.probes import Failure, bind
from keel.sandbox.exec._context import EXIT_UNAVAILABLE, exit_status

SRC = Path(__file__).resolve().parents[2] / "src"
BUILTIN_BASES = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
PRIVATE_SIGNALS = {
    "keel.policy._judge_search.TooManyAlternatives": "raised and caught in that module",
    "keel.workspace.patch._HunkFailed": "raised and caught in that module",
}
"""Exceptions outside the tree: control flow that never leaves its module."""


def _foreign_exceptions() -> set[str]:
    """Classes in src/keel that derive straight from a builtin exception (not keel.core.errors)."""
    found: set[str] = set()
    for path in sorted((SRC / "keel").rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        if module == "keel.core.errors":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id in BUILTIN_BASES for b in node.bases
            ):
                found.add(f"{module}.{node.name}")
    return found


def test_every_exception_keel_raises_is_in_the_tree() -> None:
    assert _foreign_exceptions() == set(PRIVATE_SIGNALS)


def test_the_tree_drawing_names_every_error() -> None:
    drawn = re.findall(r"^    (?:[│ ]   )*(?:[├└]── )?(\w+) ", errors.__doc__ or "", re.M)
    assert sorted(drawn) == sorted({*errors.__all__, "Failure"})


def test_every_error_has_its_own_code() -> None:
    classes = [getattr(errors, name) for name in errors.__all__]
    assert all(issubclass(cls, KeelError) for cls in classes)
    codes = [cls.default_code for cls in classes]
    assert len(set(codes)) == len(codes)
    assert all(re.fullmatch(r"[a-z_]+(\.[a-z_]+)?", code) for code in codes), codes


def test_the_new_errors_sit_where_their_callers_catch_them() -> None:
    refused = ExecRefused("no bwrap", "sandbox.unavailable")
    assert isinstance(refused, SandboxError) and refused.status == EXIT_UNAVAILABLE == 125
    assert ExecRefused("gone", "exec.not_found", 127).to_dict()["status"] == 127
    view = ViewError("the workspace is HOME", "sandbox.home")
    assert isinstance(view, ExecRefused) and (view.code, exit_status(view)) == ("sandbox.home", 125)
    assert issubclass(DemoFailed, errors.RunError) and DemoFailed("x").code == "demo.failed"
    failure = Failure("git.not_a_repo", "no repository", line=3)
    assert isinstance(failure, Signal) and failure.code == "git.not_a_repo"
    assert failure.issue.code == failure.code and failure.context["line"] == 3


def test_a_bind_error_is_a_user_error_with_the_probe_code() -> None:
    with pytest.raises(BindError) as caught:
        bind([], [1], "fs.read")
    error = caught.value
    assert isinstance(error, UserError)
    assert (error.code, error.kind, error.param) == ("probe.arg_count", "arg_count", 0)


def test_importing_the_tree_imports_no_typing() -> None:
    code = (
        "import sys, keel.core.errors; print(sorted({'typing', 'dataclasses'} & set(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
