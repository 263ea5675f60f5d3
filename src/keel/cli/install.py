"""``keel install EXTRA``: add one of keel's extras to keel's own environment.

It runs the command every install hint names (``keel.core.installed``: ``pipx inject``,
``uv pip install --python`` or the interpreter's own pip), which installs the extra's
requirements and never keel itself, and prints it first; ``--dry-run`` prints it only.

``local`` needs llama-cpp-python, which has no wheel on PyPI. pip's default build uses
-march=native, which crashes on some CPUs on any prompt longer than one token, so keel builds
it once, portably (``LLAMA_FLAGS``: GGML_NATIVE=OFF, x86-64-v3 instructions named one by one,
without what keel never loads: the multimodal library, tests, tools, examples, the server,
OpenMP), keeps the wheel and installs from it: the second time takes seconds. pip's own cache
ignores CMAKE_ARGS, so the wheel is built with --no-cache-dir into a directory named after the
version and the flags (``scripts/install-local-model.sh`` runs this command).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from keel.cli._common import examples, fail
from keel.core.errors import KeelError, RunError
from keel.core.installed import (
    DISTRIBUTION,
    install_argv,
    install_kind,
    requirements,
    shell_line,
)

LLAMA_VERSION = "0.3.36"
"""The llama-cpp-python ``keel install local`` builds (it satisfies the ``local`` extra)."""
LLAMA_FLAGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
    " -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF"
    " -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF"
)
"""CMAKE_ARGS of the portable build (see the module)."""
WHEEL_CACHE_ENV = "KEEL_WHEEL_CACHE"
"""Where built wheels are kept (default: ``wheels`` in keel's cache directory)."""


@dataclass(frozen=True)
class Step:
    """One command of an install: what it does, its argv and the variables it adds.

    ``publish``: (built, final): once the command succeeds, ``built`` is renamed ``final`` (a
    wheel directory exists only once its build has completed).
    """

    what: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    publish: tuple[Path, Path] | None = None


def register(app: typer.Typer) -> None:
    app.command(
        "install",
        epilog=examples(
            "keel install openai",
            "keel install local              # builds llama-cpp-python once (minutes)",
            "keel install --dry-run sandbox  # print the command, run nothing",
        ),
    )(install)


def install(
    extra: Annotated[
        str,
        typer.Argument(help="openai, anthropic, local, sandbox, otel, postgres, mcp, ui or ray."),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the commands; run nothing.")
    ] = False,
) -> None:
    """Install one of keel's extras into keel's own environment, leaving keel as it is.

    The command matches how keel was installed: `pipx inject keel-guard ...` for pipx,
    `uv pip install --python ...` for `uv tool`, else this Python's own pip. It installs only
    the extra's requirements (from keel-guard's metadata), never keel itself, and is printed
    before it runs. `local` first builds llama-cpp-python portably, once (a few minutes; the
    wheel is kept in ~/.cache/keel/wheels).
    """
    try:
        reqs = requirements(extra)
        steps = _llama_steps(reqs) if extra == "local" else [_install_step(reqs)]
    except KeelError as err:
        fail(err)
    kind = install_kind()
    typer.echo(
        f"{DISTRIBUTION}[{extra}] ({' '.join(reqs)}) into {sys.prefix} (installed with {kind})"
    )
    for step in steps:
        typer.echo(f"{step.what}:\n  {shell_line(step.argv, dict(step.env))}")
    if dry_run:
        return
    try:
        for step in steps:
            _run(step)
    except KeelError as err:
        fail(err)
    typer.echo(f"installed {DISTRIBUTION}[{extra}]")


def _install_step(reqs: tuple[str, ...] | list[str]) -> Step:
    return Step("install", tuple(install_argv(reqs)))


def _run(step: Step) -> None:
    """Run one step with the terminal's output; a failure is a ``RunError``."""
    sys.stdout.flush()  # the printed command comes before the installer's output, piped too
    try:
        done = subprocess.run(step.argv, env={**os.environ, **dict(step.env)}, check=False)
    except OSError as exc:
        raise RunError(
            f"cannot run {step.argv[0]}: {exc.strerror or exc} (keel runs from {sys.prefix}, "
            f"a {install_kind()} environment: its installer must be on PATH)",
            code="install.no_installer",
        ) from exc
    if done.returncode != 0:
        raise RunError(
            f"{step.what} failed: {shell_line(step.argv)} exited {done.returncode}",
            code="install.failed",
        )
    if step.publish is not None:
        built, final = step.publish
        if final.exists():  # an empty one, left by an interrupted run of an older keel
            import shutil

            shutil.rmtree(final)
        built.rename(final)


# -- local: the portable llama-cpp-python -----------------------------------------------------


def wheel_dir() -> Path:
    """The directory the portable llama-cpp-python wheel is built into, named for its flags."""
    from keel.models._local import cache_dir

    base = os.environ.get(WHEEL_CACHE_ENV) or str(cache_dir() / "wheels")
    tag = hashlib.sha256(f"{LLAMA_VERSION} {LLAMA_FLAGS}".encode()).hexdigest()[:12]
    return Path(base) / f"llama-cpp-python-{LLAMA_VERSION}-{tag}"


def _llama_steps(reqs: tuple[str, ...]) -> list[Step]:
    """Build the wheel unless it is kept, then install it with the rest of ``reqs``."""
    where = wheel_dir()
    kept = sorted(where.glob("llama_cpp_python-*.whl"))
    steps: list[Step] = []
    if not kept:
        building = where.parent / f"{where.name}.tmp"
        pip_wheel = ("wheel", "-q", "--no-deps", "--no-cache-dir", "-w", str(building))
        env = (
            ("CMAKE_ARGS", LLAMA_FLAGS),
            ("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1)),
        )
        spec = f"llama-cpp-python=={LLAMA_VERSION}"
        steps.append(Step("build", (*_pip(), *pip_wheel, spec), env, (building, where)))
    wheel = str(kept[-1]) if kept else str(where / f"llama_cpp_python-{LLAMA_VERSION}-*.whl")
    rest = [r for r in reqs if _name(r) != "llama-cpp-python"]
    return [*steps, _install_step([wheel, *rest])]


def _pip() -> tuple[str, ...]:
    """A pip that builds wheels for keel's interpreter.

    A ``uv tool`` environment has no pip: uv runs one for this interpreter, leaving the
    environment as it is.
    """
    from importlib.util import find_spec

    if find_spec("pip") is not None:
        return (sys.executable, "-m", "pip")
    return ("uv", "tool", "run", "--python", sys.executable, "--from", "pip", "pip")


def _name(requirement: str) -> str:
    """The normalised project name a requirement names (``Llama_CPP.python>=1`` -> ...)."""
    named = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return re.sub(r"[-_.]+", "-", named.group(0)).lower() if named else ""
