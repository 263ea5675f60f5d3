"""How keel was installed, and the command that adds one of its extras to keel's environment.

keel is published as ``keel-guard`` (``keel`` on PyPI is an unrelated project); the import name
and the command stay ``keel``. A hint must name a command that works for *this* installation
and adds only the extra's requirements, never keel itself: reinstalling keel to add an extra
once made a pipx install editable from a clone, and every hook failed once the clone moved.

- ``pipx``: the environment keel runs in holds ``pipx_metadata.json`` or lies among pipx's
  venvs (``$PIPX_HOME/venvs``, ``~/.local/share/pipx/venvs``, ``~/.local/pipx/venvs``):
  ``pipx inject VENV REQ...``, which pipx records (``pipx reinstall`` keeps it).
- ``uv``: ``uv-receipt.toml``, or among uv's tools (``$UV_TOOL_DIR``,
  ``~/.local/share/uv/tools``): ``uv pip install --python PYTHON REQ...``. Not
  ``uv tool install --with REQ keel-guard``: that resolves keel again from the receipt's
  source (PyPI, or a checkout that may have moved since) and reinstalls it. ``uv tool upgrade``
  drops what this adds (it is not in the receipt): ``keel install`` again after one.
- ``pip`` (anything else): ``PYTHON -m pip install REQ...``, PYTHON the interpreter keel runs on.

The requirements of an extra come from the installed distribution's metadata, so
pyproject.toml is their one source; keel run from a checkout it was never installed from reads
that checkout's pyproject.toml.

Standard library only, and only ``os`` and ``sys`` at import: the sandbox's error paths name
these hints.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

DISTRIBUTION = "keel-guard"
"""keel's name on PyPI (``pip install keel-guard``); ``import keel`` and ``keel`` stay."""
KINDS = ("pipx", "uv", "pip")
"""The ways keel can be installed that change how an extra is added (see the module)."""
PIPX_MARKER = "pipx_metadata.json"
UV_MARKER = "uv-receipt.toml"
DEVELOPER_EXTRAS = frozenset({"dev"})
"""Extras for working on keel itself (``make setup`` installs them), not for ``keel install``."""
BUILT_EXTRAS = {
    "local": "it builds llama-cpp-python once, portably: the default build crashes on some CPUs",
}
"""Extras that need more than the plain command (``keel install`` does it): why."""


def install_kind(prefix: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``pipx``, ``uv`` or ``pip``: how the environment at ``prefix`` (default keel's) was made."""
    env = os.environ if environ is None else environ
    where = os.path.realpath(prefix or sys.prefix)
    if os.path.isfile(os.path.join(where, PIPX_MARKER)) or _among(where, _pipx_venvs(env)):
        return "pipx"
    if os.path.isfile(os.path.join(where, UV_MARKER)) or _among(where, _uv_tools(env)):
        return "uv"
    return "pip"


def _data_home(env: Mapping[str, str]) -> str:
    home = env.get("HOME") or os.path.expanduser("~")
    return env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")


def _pipx_venvs(env: Mapping[str, str]) -> list[str]:
    home = env.get("HOME") or os.path.expanduser("~")
    named = [os.path.join(env["PIPX_HOME"], "venvs")] if env.get("PIPX_HOME") else []
    # pipx before 1.3 kept its home in ~/.local/pipx on every platform
    legacy = os.path.join(home, ".local", "pipx", "venvs")
    return [*named, os.path.join(_data_home(env), "pipx", "venvs"), legacy]


def _uv_tools(env: Mapping[str, str]) -> list[str]:
    named = [env["UV_TOOL_DIR"]] if env.get("UV_TOOL_DIR") else []
    return [*named, os.path.join(_data_home(env), "uv", "tools")]


def _among(path: str, parents: Sequence[str]) -> bool:
    """True if ``path`` is a directory directly inside one of ``parents``."""
    return any(os.path.dirname(path) == os.path.realpath(parent) for parent in parents)


def extras() -> dict[str, tuple[str, ...]]:
    """Each extra a user can add (``DEVELOPER_EXTRAS`` and empty ones left out) -> requirements.

    Raises:
        RunError: neither keel-guard's metadata nor a checkout's pyproject.toml is readable
            (``install.no_metadata``).
    """
    found = _from_metadata()
    if found is None:
        found = _from_pyproject()
    return {
        name: reqs for name, reqs in sorted(found.items()) if reqs and name not in DEVELOPER_EXTRAS
    }


def requirements(extra: str) -> tuple[str, ...]:
    """The requirements ``extra`` adds, as pip takes them (``openai>=1.40``).

    Raises:
        UsageError: no such extra (``usage.extra``, naming the extras there are).
        RunError: the metadata cannot be read (``install.no_metadata``).
    """
    known = extras()
    if extra not in known:
        from keel.core.errors import UsageError

        raise UsageError(
            f"unknown extra {extra!r}: choose one of {', '.join(known)}", code="usage.extra"
        )
    return known[extra]


def _from_metadata() -> dict[str, tuple[str, ...]] | None:
    """The extras in keel-guard's installed metadata; ``None`` when it is not installed."""
    import re
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    found: dict[str, list[str]] = {
        name: [] for name in dist.metadata.get_all("Provides-Extra") or []
    }
    for line in dist.requires or []:
        requirement, _, marker = line.partition(";")
        named = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        if named and named.group(1) in found:
            found[named.group(1)].append(requirement.strip())
    return {name: tuple(reqs) for name, reqs in found.items()}


def _from_pyproject() -> dict[str, tuple[str, ...]]:
    """The extras of the checkout keel runs from (``src/keel`` -> ``pyproject.toml``)."""
    import tomllib

    from keel.core.errors import RunError

    path = os.path.join(
        os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "pyproject.toml"
    )
    try:
        with open(path, "rb") as f:
            project = tomllib.load(f).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RunError(
            f"cannot tell the requirements of keel's extras: {DISTRIBUTION} is not installed "
            f"and {os.path.normpath(path)} is unreadable ({exc})",
            code="install.no_metadata",
        ) from exc
    if project.get("name") != DISTRIBUTION:
        raise RunError(
            f"cannot tell the requirements of keel's extras: {DISTRIBUTION} is not installed "
            f"and {os.path.normpath(path)} is not its pyproject.toml",
            code="install.no_metadata",
        )
    optional = project.get("optional-dependencies", {})
    return {name: tuple(reqs) for name, reqs in optional.items()}


def install_argv(
    reqs: Sequence[str],
    *,
    kind: str | None = None,
    prefix: str | None = None,
    python: str | None = None,
) -> list[str]:
    """The command that adds ``reqs`` to keel's environment (``prefix``, run by ``python``).

    Defaults: keel's own environment (``sys.prefix``), interpreter (``sys.executable``) and
    ``install_kind``. Only ``reqs`` are installed; keel itself is left as it is.
    """
    prefix = prefix or sys.prefix
    python = python or sys.executable
    kind = kind or install_kind(prefix)
    if kind == "pipx":  # the venv's name is pipx's name for it (keel-guard, or with a suffix)
        return ["pipx", "inject", os.path.basename(os.path.normpath(prefix)), *reqs]
    if kind == "uv":  # see the module: `uv tool install --with` would reinstall keel
        return ["uv", "pip", "install", "--python", python, *reqs]
    return [python, "-m", "pip", "install", *reqs]


def shell_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """``argv`` (after ``env``'s assignments) as one line a POSIX shell runs as given."""
    import shlex

    assignments = [f"{name}={shlex.quote(value)}" for name, value in (env or {}).items()]
    return " ".join([*assignments, *(shlex.quote(arg) for arg in argv)])


def hint(extra: str) -> str:
    """How to add ``extra`` to keel's environment, for an error message; never raises.

    ``keel install EXTRA``, and the command it runs where that is all it does.
    """
    command = f"keel install {extra}"
    if extra in BUILT_EXTRAS:
        return f"{command} ({BUILT_EXTRAS[extra]})"
    try:
        line = shell_line(install_argv(requirements(extra)))
    except Exception:  # a hint is part of an error message: never a second error
        return command
    return f"{command}, or: {line}"
