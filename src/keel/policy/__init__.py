"""The policy engine: default deny, deny beats ask beats allow, a rule id on every decision.

``Policy`` judges shell command lines (parsed with tree-sitter-bash, wrappers unwrapped),
file paths (canonicalised against the workspace root, protected globs, scope), URLs
(against the network allowlist) and whole tool calls. ``keel policy check``'s fast entry,
used before typer is imported, is ``keel.cli.policy_fast``.

Importing this package is cheap: ``Policy`` (and with it ``keel.core.decision``, ``keel.core.calls``
and ``dataclasses``) is loaded on first access, so the fast path never pays for it.

Rule ids are stable: ``constraint.<id>`` (a constraint's ``id``, else its 0-based index),
``input.*``, ``risk.*``, ``path.*``, ``network.*``, ``parse.*``, ``config.allow|ask|deny``,
``preset.<name>.allow|ask|deny|no_writes``, ``default.ask|deny``, ``command.empty``,
``call.no_path`` and ``internal_error``. Among them: ``path.control`` (keel's control files,
at any depth), ``path.created_in_line`` (a write through a path the same line creates),
``risk.runs_program`` (an option that runs another program), ``risk.env_injection`` and
``risk.path_override`` (variables that inject programs), ``network.env_override``,
``parse.arithmetic``, ``parse.cdpath``, ``risk.shared_history``, ``risk.git_push_delete``,
``risk.git_stash_all``.

A policy is *contained* when every command it allows runs inside ``keel exec``
(``Policy.for_root(..., contained=True)``); see ``keel.policy._core`` for what that changes.

Besides ``Policy``, the package exports the facts other layers share with it, so that none of
them reaches into its private modules: ``GlobSet`` and ``glob_to_regex`` (the gitignore-style
globs of ``[sandbox] read_only`` and the protected paths), ``port_allowed`` (which ports a
``network_allow`` entry allows; ``keel wrap``'s proxy applies the same rule), ``allow_entry``,
``host_pattern`` and ``canonical_host`` (how an entry spells a host and port, and how it is
read; ``keel allow-host`` and the proxy's refusals name entries with them),
``CommandFacts`` and ``CONSERVATIVE`` (what a command line does, for the monitor),
``secret_excludes`` (the secret-file globs a client's search is rewritten to exclude) and
``literal_dir`` (where a walking glob starts). ``preload`` readies the engine in a
long-lived process (hookd).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs 3 ms to import on the hook path
if TYPE_CHECKING:
    from keel.policy._facts import CONSERVATIVE, CommandFacts
    from keel.policy._judge_net import allow_entry, canonical_host, host_pattern, port_allowed
    from keel.policy._judge_search import literal_dir, secret_excludes
    from keel.policy._paths import GlobSet, glob_to_regex
    from keel.policy._policy import Policy, patch_paths

__all__ = [
    "CONSERVATIVE",
    "CommandFacts",
    "GlobSet",
    "Policy",
    "allow_entry",
    "canonical_host",
    "glob_to_regex",
    "host_pattern",
    "literal_dir",
    "patch_paths",
    "port_allowed",
    "preload",
    "secret_excludes",
]

_WHERE = {
    "Policy": "_policy",
    "patch_paths": "_policy",
    "GlobSet": "_paths",
    "glob_to_regex": "_paths",
    "port_allowed": "_judge_net",
    "allow_entry": "_judge_net",
    "canonical_host": "_judge_net",
    "host_pattern": "_judge_net",
    "CommandFacts": "_facts",
    "CONSERVATIVE": "_facts",
    "secret_excludes": "_judge_search",
    "literal_dir": "_judge_search",
}
"""The private module each export lives in, imported on first access."""


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'keel.policy' has no attribute {name!r}")
    module = __import__(f"keel.policy.{where}", fromlist=[name])
    return getattr(module, name)


def preload() -> None:
    """Import the engine and build the shell parser now, not on the first request (hookd).

    A parser that cannot be built fails here quietly, and again on the first line that needs
    it, as it would without the preload (the policy fails closed on it).
    """
    import keel.policy._policy
    import keel.policy._shell

    try:
        keel.policy._shell._parser()
    except Exception:
        return
