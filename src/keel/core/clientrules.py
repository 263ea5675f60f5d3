"""Claude Code permission rules, read as keel command patterns or refused with the keel form.

Claude Code writes its rules as ``Tool(specifier)``: ``Bash(npm test:*)``, ``Bash(git status)``,
``Read(./.env)``, ``WebFetch(domain:example.com)``. keel's ``[policy] allow/ask/deny`` hold
command patterns (argv words, each an ``fnmatch`` glob; see ``keel.policy._match``). A shell
rule that keel can express the same way or more strictly is translated:

- ``Bash(npm test:*)`` and ``Bash(npm test *)`` (a prefix) become ``npm test``;
- ``Bash(npm run test-*)`` (a glob ending the last word) becomes ``npm run test-*``;
- ``Bash(git status)`` (exactly that command) becomes ``git status $``.

Everything else raises ``ValueError`` whose message names the keel form to write instead: a
``*`` inside a rule (Claude's spans any number of words, keel's one), compound commands,
blanket rules (``Bash``, ``Bash(*)``), and rules for other tools (file paths go to ``[scope]``,
``[policy] protected``, ``read_outside`` or ``[[constraints]] protect``; hosts to
``network_allow``). Nothing in Claude's syntax is ever kept as a pattern that cannot match.

Standard library only (``shlex`` and ``re`` are imported when a rule is actually translated):
the policy engine calls ``client_rule_pattern`` for any pattern that looks like a rule.
"""

from __future__ import annotations

CLAUDE_TOOLS = frozenset(
    {
        "Agent",
        "Bash",
        "BashOutput",
        "Edit",
        "ExitPlanMode",
        "Glob",
        "Grep",
        "KillShell",
        "LS",
        "MultiEdit",
        "NotebookEdit",
        "NotebookRead",
        "Read",
        "SlashCommand",
        "Skill",
        "Task",
        "TodoWrite",
        "WebFetch",
        "WebSearch",
        "Write",
    }
)
"""Claude Code's tool names, which never name a command in a keel pattern."""

NAMED_NETWORK_TOOLS = frozenset({"WebSearch"})
"""Network tools whose calls carry no URL, so keel judges them by name."""
_PATH_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "NotebookRead"})
_SHELL_OPERATORS = ("&&", "||", ";", "|", ">", "<", "`", "$(", "\n")


def looks_like_client_rule(pattern: str) -> bool:
    """True when ``pattern`` is written in a client's rule syntax (``Tool(...)``)."""
    text = pattern.strip()
    # a bare tool name ("WebSearch", "mcp__github__x") is keel's own form for a tool with no
    # command or path to judge, so only the Tool(specifier) form is a client rule
    head, paren, _ = text.partition("(")
    return bool(paren) and text.endswith(")") and head.isidentifier()


def blanket_tool_rule(pattern: str) -> bool:
    """True when ``pattern`` is the bare name of a Claude Code tool keel judges by its target.

    ``Bash``, ``Read``, ``WebFetch``... alone are Claude's rules for every call of that tool;
    keel judges those calls by their command, path or host, never by the tool's name, so such
    a pattern would never match. Tools keel does judge by name (``WebSearch``, ``Task``, MCP
    tools) are keel's own tool rules and stay valid.
    """
    from keel.core.calls import tool_kind

    text = pattern.strip()
    return (
        text in CLAUDE_TOOLS
        and text not in NAMED_NETWORK_TOOLS
        and tool_kind(text) not in ("mcp", "other")
    )


def malformed_client_rule(pattern: str) -> bool:
    """True when ``pattern`` starts like a client rule (``Tool(``) but is not one.

    Such a string is no command pattern either (no command is named ``Bash(npm``), so it is
    refused rather than kept as a pattern that never matches.
    """
    head, paren, _ = pattern.strip().partition("(")
    return bool(paren) and head.isidentifier() and not looks_like_client_rule(pattern)


def client_rule_pattern(rule: str, tier: str = "allow") -> str:
    """The keel command pattern that means what the Claude Code rule ``rule`` means.

    Args:
        rule: a Claude Code permission rule, e.g. ``Bash(npm test:*)``.
        tier: where the rule stands (``allow``, ``ask``, ``deny`` or ``forbid``), for the
            wording of the keel form suggested when it cannot be translated.

    Returns:
        The pattern in keel's syntax (``npm test``, ``git status $``).

    Raises:
        ValueError: the rule has no keel command pattern; the message names the keel form.
    """
    text = rule.strip()
    tool, paren, rest = text.partition("(")
    inner = rest[:-1] if paren and rest.endswith(")") else None
    if tool == "Bash" and inner is not None and inner.strip() not in ("", "*"):
        return _bash(text, inner.strip())
    raise ValueError(_no_command_pattern(text, tool, inner, tier))


def _bash(rule: str, inner: str) -> str:
    import shlex

    if any(op in inner for op in _SHELL_OPERATORS):
        raise ValueError(
            f"{rule!r} is a compound command; keel judges each simple command of a line on its "
            "own: list the commands as separate patterns, e.g. "
            f"{_quote(inner.split('&&')[0].split('|')[0].split(';')[0].strip())}"
        )
    exact = True
    body = inner
    if body.endswith((":*", " *")):  # Claude's prefix forms
        body, exact = body[:-2].rstrip(), False
    elif body.endswith("*"):
        exact = False  # a glob ending the last word: keel globs words too, and allows a prefix
    try:
        words = shlex.split(body)
    except ValueError as exc:
        raise ValueError(f"{rule!r} cannot be read: {exc}") from None
    if not words:
        raise ValueError(f"{rule!r} names no command")
    inside = words if exact else [*words[:-1], words[-1].rstrip("*")]
    if any("*" in w for w in inside):
        hint = " ".join("*" if "*" in w else w for w in words)
        raise ValueError(
            f"{rule!r} has a '*' inside it, which in Claude Code spans any number of words; in "
            "keel a pattern is an argv prefix whose words are globs for one word each: write "
            f"one pattern per command you mean ({_quote(hint)} would match exactly one word "
            "for each '*')"
        )
    return shlex.join(words) + (" $" if exact else "")


def _no_command_pattern(rule: str, tool: str, inner: str | None, tier: str) -> str:
    spec = (inner or "").strip()
    where = f"{rule!r} is a Claude Code rule"
    if tool == "Bash":
        return (
            f"{where} for every shell command; keel takes no blanket command rule: choose "
            '[policy] preset = "developer" (or "strict"), or list commands such as "npm test"'
        )
    if not spec and tool in CLAUDE_TOOLS:
        return (
            f"{where} for every {tool} call; keel takes no blanket rule for it and judges each "
            "call by what it touches (paths: [scope] and [policy] protected; hosts: [policy] "
            "network_allow)"
        )
    if tool == "WebFetch" and spec.startswith("domain:"):
        host = spec.partition(":")[2].strip()
        if tier == "allow":
            return f"{where}; the keel form is [policy] network_allow = [{_quote(host)}]"
        return (
            f"{where}; keel reaches only the hosts in [policy] network_allow (and the preset's): "
            f"leave {_quote(host)} out of network_allow"
        )
    if tool in _PATH_TOOLS and spec:
        glob = _claude_path(spec)
        if tool in ("Read", "NotebookRead"):
            if tier == "allow" and glob.startswith(("/", "~")):
                return f"{where}; the keel form is [policy] read_outside = [{_quote(glob)}]"
            if tier == "allow":
                return f"{where}; keel allows reads inside the workspace already: leave it out"
            return (
                f"{where}; keel has no per-path read deny: secrets (.env*, keys) are hidden from "
                f"the agent already; to keep {_quote(glob)} from being written use "
                f"[[constraints]] protect = [{_quote(glob)}]"
            )
        if tier == "allow":
            return f"{where}; the keel form is [scope] include = [{_quote(glob)}]"
        return f"{where}; the keel form is [[constraints]] protect = [{_quote(glob)}]"
    return (
        f"{where} for the {tool or rule} tool; keel.toml [policy] allow/ask/deny hold command "
        'patterns such as "npm test" (argv words, globs per word), and keel has no rule for '
        "that tool"
    )


def _claude_path(spec: str) -> str:
    """A Claude path specifier as keel writes it.

    ``//abs`` is absolute; ``./x`` and ``/x`` (relative to the settings file, i.e. the
    project) are workspace-relative.
    """
    if spec.startswith("//"):
        return spec[1:]
    if spec.startswith("./"):
        return spec[2:]
    if spec.startswith("/"):
        return spec[1:]
    return spec


def _quote(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)
