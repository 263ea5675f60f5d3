"""Shared by the issue-22 regression suite: the sandbox gate."""

from __future__ import annotations

import os

import pytest


def require_sandbox(backend: str = "auto") -> str:
    """The backend ``keel exec`` uses for ``backend`` here; a skip (a failure in CI) if none.

    A named backend must be exactly that one (Landlock is optional in CI, bwrap is not).
    """
    from keel.sandbox.exec.contain import exec_backend

    got, reason = exec_backend(backend)
    if got is None or (backend != "auto" and got != backend):
        if os.environ.get("KEEL_REQUIRE_ALL") == "1" and backend in ("auto", "bwrap"):
            pytest.fail(f"no {backend} sandbox: {reason}")
        pytest.skip(f"no {backend} sandbox: {reason}")
    return got
