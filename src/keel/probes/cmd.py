"""Command probes: is a program installed, and which version.

``version`` runs ``NAME --version`` (only for a plain name found on ``PATH``) with no input and
the probe's timeout; inside the sandbox that is the sandbox's view of the system.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from keel.probes._fs import ProbeContext
from keel.probes._result import Failure

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_VERSION = re.compile(r"\d+(?:\.\d+)+[0-9A-Za-z.+-]*")


def _check(name: str) -> None:
    if not _NAME.match(name):
        raise Failure("cmd.bad_name", f"{name!r} is not a plain program name")


def which(ctx: ProbeContext, name: str) -> str | None:
    """The full path of program ``name`` on ``PATH``, or null."""
    del ctx
    _check(name)
    return shutil.which(name)


def version(ctx: ProbeContext, name: str) -> str | None:
    """The version ``NAME --version`` prints, or null when absent or unrecognisable."""
    _check(name)
    exe = shutil.which(name)
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "--version"],
            capture_output=True,
            timeout=max(1.0, min(5.0, ctx.timeout - 0.5)),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise Failure("cmd.timeout", f"{name} --version did not finish") from exc
    except OSError as exc:
        raise Failure("cmd.unavailable", f"{name} cannot run: {exc.strerror}") from exc
    text = (done.stdout[:4096] + b"\n" + done.stderr[:4096]).decode("utf-8", "replace")
    match = _VERSION.search(text)
    if match is None:
        ctx.note(f"{name} --version printed no version number")
        return None
    return match.group(0)
