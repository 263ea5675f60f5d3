"""``keel wrap`` as a library: run a whole agent client inside ``keel exec``'s sandbox.

``run_wrapped(["claude", "-p", ...], workspace=W)`` runs the client with everything
``run_contained`` promises (the workspace writable in place, keel's and the agents' control
files read-only, a fresh HOME without secrets, a filtered environment, the network only through
the allowlisting proxy, its own pid namespace, ``keel stop`` kills it), plus:

- the client's state (``~/.claude`` and ``~/.claude.json``, ``$CODEX_HOME`` or ``~/.codex``,
  ``~/.gemini``) writable, its settings in there read-only, and settings it plants renamed
  aside after the run;
- its install directory and keel's read-only, so the client and its hooks run inside;
- its API key variables (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``GEMINI_API_KEY``...,
  and ``pass_env``), which ``keel exec``'s filter would remove. The trade-off: the client
  hands its environment to every command it runs, so those commands can read the key (as
  they can read the client's state directory, where OAuth tokens live). Nothing else secret
  is passed; the key can only leave through the proxy, to allowed hosts. Use a key scoped to
  this use. (Claude Code's own ``CLAUDE_CODE_SUBPROCESS_ENV_SCRUB`` would hide it from its
  commands, but it needs bubblewrap inside, which cannot nest here);
- its model hosts (from its base-URL variables and Codex's providers) and ``allow_hosts``
  allowed through the proxy, besides ``[policy] network_allow``; an allowed
  ``127.0.0.1:PORT`` is also reachable inside by a direct connection (relayed through the
  proxy);
- keel's hooks decided outside the sandbox, by a service only ``keel wrap`` runs; an allowed
  shell command is not rewritten to ``keel exec``: it is contained already.

Everything the client spawns is contained, by construction. bubblewrap is required.
"""

from __future__ import annotations

import os
import sys

from keel.sandbox.exec.contain import ExecResult

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import TextIO

    from keel.sandbox.exec._context import Outcome
    from keel.sandbox.wrap._wrap import Wrap

__all__ = ["run_wrapped"]


def run_wrapped(
    command: Sequence[str],
    *,
    workspace: str | os.PathLike[str],
    allow_hosts: Sequence[str] = (),
    client: str | None = None,
    pass_env: Sequence[str] = (),
    timeout: float | None = None,
    environ: Mapping[str, str] | None = None,
    err: TextIO | None = None,
) -> ExecResult:
    """Run the client ``command`` inside the sandbox of ``workspace`` and wait for it.

    Args:
        command: The client's argv, e.g. ``["claude", "-p", "fix the tests"]``.
        workspace: The workspace root.
        allow_hosts: ``HOST`` (ports 80 and 443) or ``HOST:PORT`` entries also allowed
            through the proxy.
        client: ``claude``, ``codex``, ``gemini`` or ``other``; detected from ``command[0]``
            when ``None``.
        pass_env: Variables to give the client unfiltered, besides its known API keys.
        timeout: Wall-clock seconds; no limit when ``None``.
        environ: The environment to start from; ``os.environ`` when ``None``.
        err: Where keel's own one-line notices go (``sys.stderr``).

    Returns:
        The run; ``exit_code`` is the client's (or 123 to 127, as for ``keel exec``).

    Raises:
        StopRequested: the emergency stop is set (``stop.active``).
        SandboxError: the client cannot be wrapped here (``sandbox.*``, ``wrap.*``).
        ConfigError: keel.toml is invalid.
        UsageError: an empty command, a bad ``--allow-host`` or ``--client``.
    """
    from keel.sandbox.exec._exec import execute

    environ = os.environ if environ is None else environ
    out = err or sys.stderr
    wrap = _prepare(command, environ, allow_hosts, client, pass_env)
    try:
        outcome = execute(
            command,
            workspace=os.fspath(workspace),
            timeout=timeout,
            environ=environ,
            err=out,
            wrap=wrap,
        )
    finally:
        wrap.close()
    return ExecResult.of(_settle(wrap, outcome, out), out)


def _prepare(
    command: Sequence[str],
    environ: Mapping[str, str],
    allow_hosts: Sequence[str],
    client: str | None,
    pass_env: Sequence[str],
) -> Wrap:
    from keel.sandbox.exec._context import passwd_home
    from keel.sandbox.wrap._wrap import Wrap, wrap_spec

    home = os.path.realpath(environ.get("HOME") or passwd_home())
    spec = wrap_spec(
        command,
        environ=environ,
        home=home,
        client=client,
        allow_hosts=allow_hosts,
        pass_env=pass_env,
    )
    return Wrap(spec, command, environ)


def _settle(wrap: Wrap, outcome: Outcome, out: TextIO) -> Outcome:
    """Put the client's settings back as they were; report what was moved or restored.

    The run with the moved and restored settings added (``unchecked`` if they could not be).
    """
    try:
        moved, restored = wrap.after()
    except OSError as exc:  # fail closed: an unchecked run does not count as a clean one
        out.write(f"keel: could not check the client's settings after the run: {exc}\n")
        return outcome.replace(unchecked=True)
    if moved:
        from keel.sandbox.wrap._state import ASIDE

        out.write(
            "keel: the client's session created or changed settings that would run code the "
            f"next time it starts; renamed aside ({ASIDE}*): {', '.join(moved)}\n"
        )
    if restored:
        out.write(
            "keel: the client's session changed MCP servers or permissions in its state; put "
            f"back as they were (the changed copy is beside it): {', '.join(restored)}\n"
        )
    return outcome.replace(
        quarantined=(*outcome.quarantined, *moved), restored=(*outcome.restored, *restored)
    )
