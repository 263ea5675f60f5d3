"""``python -m keel.sandbox.probe._selftest``: print what a sandboxed interpreter sees, as JSON.

Used by ``keel sandbox check`` and the tests to prove ``run_python`` works: the uid, the cwd,
whether the workspace is writable, and whether keel's dependencies (PyYAML's C extension,
pydantic) import.
"""

from __future__ import annotations

import json
import os
import sys


def _can_write(directory: str) -> bool:
    path = os.path.join(directory, f".keel-selftest-{os.getpid()}")
    try:
        with open(path, "x"):
            pass
    except OSError:
        return False
    os.unlink(path)
    return True


def main() -> None:
    """Print the self-test report on stdout."""
    import yaml

    import keel

    report = {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "cwd": os.getcwd(),
        "can_write_workspace": _can_write(os.getcwd()),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "keel": keel.__version__,
        "libyaml": bool(getattr(yaml, "__with_libyaml__", False)),
        "stdin": sys.stdin.read() if not sys.stdin.isatty() else "",
    }
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
