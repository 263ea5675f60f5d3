"""``keel init``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from keel.cli._common import JsonOpt, WorkspaceOpt, examples, fail, print_json, utf8_text
from keel.core.errors import KeelError, UsageError
from keel.core.root import find_root, state_dir

DENY_RULES_NOTE = (
    "note: once keel rewrites an allowed command into `keel exec`, Claude Code's own deny and "
    "ask rules judge the rewritten command and no longer match it; keel.toml is where they "
    "stay in force."
)


class _Report:
    """What ``keel init`` did: lines for a person, or one JSON object with ``--json``."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.data: dict[str, Any] = {}

    def say(self, text: str) -> None:
        if not self.as_json:
            typer.echo(text)

    def warn(self, text: str) -> None:
        self.data.setdefault("warnings", []).append(text)
        typer.echo(text, err=True)


def register(app: typer.Typer) -> None:
    app.command(
        "init",
        epilog=examples(
            "keel init --agent claude --scope 'src/**,tests/**'",
            "keel init --agent claude --shared     # .claude/settings.json, for the team",
            "keel init --agent codex --trust       # also trust the project in ~/.codex",
            "keel init --agent gemini --remove",
            "keel init --agent claude --mcp        # also keel's guarded tools (keel mcp)",
            "keel init --agent claude --json      # what was written, as one JSON object",
        ),
    )(init)


def init(
    ctx: typer.Context,
    preset: Annotated[
        str, typer.Option("--preset", help="strict, developer or readonly.")
    ] = "developer",
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Register keel's hooks for claude, codex or gemini."),
    ] = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope", help="Paths the task may change (globs); repeat or comma-separate."
        ),
    ] = None,
    remove: Annotated[
        bool, typer.Option("--remove", help="With --agent: take out exactly the hooks keel added.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite an existing keel.toml.")
    ] = False,
    shared: Annotated[
        bool,
        typer.Option(
            "--shared",
            help="With --agent: register in the project file to commit (.claude/settings.json, "
            ".codex/hooks.json, .gemini/settings.json) a command that runs keel from PATH, for "
            "every teammate; a teammate without keel gets each tool call blocked, with the "
            "command that installs it. Default: per-user, kept out of git.",
        ),
    ] = False,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            hidden=True,
            help="The default now (a per-user registration); kept for old scripts.",
        ),
    ] = False,
    trust: Annotated[
        bool,
        typer.Option(
            "--trust",
            help="With --agent codex: record that Codex trusts this project in "
            "$CODEX_HOME/config.toml (Codex runs no hooks of an untrusted project).",
        ),
    ] = False,
    import_rules: Annotated[
        bool,
        typer.Option(
            "--import/--no-import",
            help="With --agent: carry the client's own permission rules into a new keel.toml.",
        ),
    ] = True,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp",
            help="With --agent claude: also register keel's guarded tools as an MCP server "
            "(`keel mcp`, tools mcp__keel__*) in .mcp.json, per-user (kept out of git).",
        ),
    ] = False,
    workspace: WorkspaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a commented keel.toml and .keel/, git-ignore .keel/, and optionally register hooks.

    With --agent, keel's hooks are registered per-user: this machine's keel, in
    .claude/settings.local.json (Claude Code) or the project file (Codex, Gemini CLI), listed in
    .git/info/exclude so that it is never committed; --shared registers, for the whole team, a
    command that runs keel from PATH. The client's own permission rules (Claude Code's
    permissions.allow/ask/deny, Codex's execpolicy prefix_rule files) go into the keel.toml
    written, and the ones keel cannot express are listed. Then run `keel doctor` to check the
    guard end to end.
    """
    from keel.init import init_workspace

    chosen = workspace or (ctx.obj or {}).get("workspace")
    root = Path(find_root(override=str(chosen))) if chosen else Path.cwd().resolve()
    globs = [g.strip() for item in scope or [] for g in item.split(",") if g.strip()] or None
    out = _Report(as_json)
    try:
        for glob in globs or []:
            if utf8_text(glob) != glob:
                raise UsageError(f"--scope {utf8_text(glob)!r} is not valid UTF-8")
        _check_options(agent, remove=remove, local=local, trust=trust, shared=shared, mcp=mcp)
        if remove:
            _remove(out, root, str(agent))
            _finish(out, root, agent)
            return
        rules = None
        if agent and import_rules:
            from keel.hook.permissions import read_permissions

            rules = read_permissions(root, agent)
        result = init_workspace(root, preset, force=force, scope=globs, rules=rules)
        out.data.update(
            config=str(result.config_path),
            wrote_config=result.wrote_config,
            preset=preset,
            scope=globs,
            scope_was=list(result.scope_was) if result.scope_was is not None else None,
            state_dir=str(state_dir(result.root)),
            updated_gitignore=result.updated_gitignore,
        )
        if result.wrote_config:
            out.say(f"wrote {result.config_path} (preset {preset})")
        else:
            out.say(f"kept existing {result.config_path} (use --force to overwrite)")
            if result.scope_was is not None:
                out.say(
                    f"set [scope] include = {json.dumps(globs)} in it "
                    f"(was {json.dumps(list(result.scope_was))})"
                )
            elif globs:
                out.say(f"[scope] include is {json.dumps(globs)} already")
        out.say(f"state directory {state_dir(result.root)}")
        if result.updated_gitignore:
            out.say("added .keel/ to .gitignore")
        if rules:
            _report_rules(out, rules, str(agent), written=result.wrote_config)
        if agent:
            _install(out, root, agent, shared=shared)
        if mcp:
            _install_mcp(out, root)
        _register(out, root, agent)
        if agent == "codex":
            _codex_trust(out, root, trust)
        if agent:
            out.say(f"check the guard end to end: keel doctor --agent {agent}")
        _finish(out, root, agent)
    except KeelError as exc:
        fail(exc, as_json=as_json)


def _finish(out: _Report, root: Path, agent: str | None) -> None:
    if out.as_json:
        print_json({"root": str(root), "agent": agent, **out.data})


def _check_options(
    agent: str | None, *, remove: bool, local: bool, trust: bool, shared: bool, mcp: bool = False
) -> None:
    from keel.hook.protocol import AGENTS

    if mcp and (agent != "claude" or remove):
        raise UsageError(
            "--mcp needs --agent claude (--remove takes keel's MCP server out too)",
            code="usage.mcp",
        )
    if agent is not None and agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}; choose one of {', '.join(AGENTS)}")
    if remove and not agent:
        raise UsageError("--remove needs --agent")
    if (shared or local) and not agent:
        flag = "--shared" if shared else "--local"
        raise UsageError(f"{flag} needs --agent", code="usage.shared")
    if shared and local:
        raise UsageError(
            "--shared and --local do not go together (--local, per-user, is the default)",
            code="usage.shared",
        )
    if shared and remove:
        raise UsageError(
            "--remove takes keel's hooks out of every file; it takes no --shared",
            code="usage.shared",
        )
    if trust and agent != "codex":
        raise UsageError("--trust needs --agent codex", code="usage.trust")
    if trust and remove:
        raise UsageError("--trust and --remove do not go together", code="usage.trust")


def _install(out: _Report, root: Path, agent: str, *, shared: bool) -> None:
    from keel.hook.install import install_hooks, placement

    team = placement(root, agent, ask_git=False)
    if not shared and team is not None and team.shared:
        # the team's committed registration guards this clone already; a per-user one would
        # take it out of the shared file (a change to commit) or run every hook twice
        out.data.update(hooks=[str(team.settings)], form="shared", kept=True)
        out.say(
            f"keel's {agent} hooks are registered for the team in {team.settings} (shared: keel "
            f"from PATH); left as they are (keel init --agent {agent} --shared rewrites them)"
        )
        _warn_without_keel(out, root)
        return
    (path,) = install_hooks(root, agent, shared=shared)
    where = placement(root, agent)
    out.data["hooks"] = [str(path)]
    out.data["form"] = "shared" if shared else "per-user"
    out.data["git_exclude"] = str(where.exclude) if where and where.exclude else None
    out.data["tracked"] = where.tracked if where else None
    rel = path.relative_to(root).as_posix()
    if shared:
        out.say(
            f"registered keel's {agent} hooks in {path} (shared: commit it; the hooks run keel "
            "from PATH, for every teammate who has keel, and block each tool call of one who "
            "has not, saying how to install it)"
        )
        _warn_without_keel(out, root)
        return
    out.say(f"registered keel's {agent} hooks in {path} (per-user: this machine's keel)")
    if where is None or not where.repository:
        return
    if where.tracked:
        out.warn(
            f"WARNING: git tracks {rel}: committing it would give every teammate keel's hook "
            "with this machine's paths, which blocks each of their tool calls. Keep it out of "
            f"your commits, or register the shared form: keel init --agent {agent} --shared"
        )
    elif where.exclude is not None:
        out.say(f"{rel} is kept out of git: it is listed in {where.exclude}")
    else:
        out.warn(f"warning: could not list {rel} in .git/info/exclude: keep it out of commits")


def _install_mcp(out: _Report, root: Path) -> None:
    """Register ``keel mcp`` in .mcp.json; say whether keel's hooks let its tools through."""
    from keel.hook import gitexclude
    from keel.hook.install import MCP_CONFIG, install_mcp

    path = install_mcp(root)
    out.data["mcp"] = {"config": str(path), "server": "keel"}
    out.say(
        f"registered keel's guarded tools for Claude Code in {path} (MCP server `keel`: "
        "mcp__keel__run, mcp__keel__read_file, ...; per-user: this machine's keel)"
    )
    repo = gitexclude.repository(root)
    if repo is not None and gitexclude.tracked(repo, path):
        out.warn(
            f"WARNING: git tracks {MCP_CONFIG}: keel's entry names this machine's keel; keep "
            "that change out of your commits"
        )
    if not _policy_allows(root, "mcp__keel__run"):
        out.say(
            "keel's hooks ask before each mcp__keel__* call (keel.toml does not allow them); "
            'the server guards every call itself: add "mcp__keel__*" to [policy] allow in '
            "keel.toml to let them through"
        )


def _policy_allows(root: Path, tool: str) -> bool:
    """Whether the workspace's policy allows the MCP tool ``tool`` by name (the hooks' view)."""
    from keel.config import config_for
    from keel.core.calls import ToolCall
    from keel.policy import Policy

    policy = Policy.from_config(config_for(root), str(root), contained=False)
    return policy.check_call(ToolCall(tool, "mcp", agent="claude", cwd=str(root))).allowed


def _warn_without_keel(out: _Report, root: Path) -> None:
    """Warn when no ``keel`` is on PATH for the shared command (its own rule: not the project's)."""
    import os
    import shutil

    from keel.core.gitsafe import safe_path
    from keel.hook.install import INSTALL_KEEL

    search = safe_path(os.environ.get("PATH"), str(root))
    if not search or shutil.which("keel", path=search) is None:
        out.warn(
            "warning: no keel on PATH (outside the project) here, so these hooks block every "
            f"tool call on this machine until there is: {INSTALL_KEEL}"
        )


def _remove(out: _Report, root: Path, agent: str) -> None:
    from keel.hook.gitexclude import listed
    from keel.hook.install import recorded_exclude, remove_hooks, settings_files

    exclude = recorded_exclude(root, agent)
    removed = remove_hooks(root, agent)
    out.data["removed"] = [str(p) for p in removed]
    for path in removed:
        out.say(f"removed keel's {agent} hooks from {path}")
    if agent == "claude":
        from keel.hook.install import remove_mcp

        mcp_file = remove_mcp(root)
        if mcp_file is not None:
            out.data["removed_mcp"] = str(mcp_file)
            out.say(f"removed keel's MCP server from {mcp_file}")
    if exclude is not None and not listed(*exclude):
        out.data["removed_exclude"] = {"file": str(exclude[0]), "line": exclude[1]}
        out.say(f"removed {exclude[1]} from {exclude[0]}")
    if not removed:
        files = ", ".join(str(root / rel) for rel in settings_files(agent))
        out.say(f"nothing to remove: keel's {agent} hooks are not registered in {files}")


def _report_rules(out: _Report, rules: object, agent: str, *, written: bool) -> None:
    from keel.hook.permissions import TIERS, PermissionImport
    from keel.init import command_array

    assert isinstance(rules, PermissionImport)
    client = {"claude": "Claude Code", "codex": "Codex"}.get(agent, agent)
    out.data["rules"] = {
        "imported": written,
        "translated": [
            {"tier": r.tier, "pattern": r.pattern, "rule": r.rule, "source": r.source}
            for r in rules.imported
        ],
        "skipped": [
            {"tier": r.tier, "rule": r.rule, "source": r.source, "reason": r.reason}
            for r in rules.skipped
        ],
    }
    if rules.imported and written:
        out.say(f"imported {len(rules.imported)} of {client}'s permission rules into [policy]:")
        for rule in rules.imported:
            out.say(f"  {rule.tier:<5} {json.dumps(rule.pattern)}  <- {rule.rule} ({rule.source})")
    elif rules.imported:
        out.say(
            f"keel.toml was kept, so {client}'s permission rules were not imported; "
            "add them to its [policy] yourself:"
        )
        for tier in TIERS:
            if rules.patterns(tier):
                for line in command_array(tier, rules).splitlines():
                    out.say(f"  {line}")
    if rules.skipped:
        out.say(f"not imported: {len(rules.skipped)} rule(s) keel cannot express as commands:")
        for skipped in rules.skipped:
            out.say(f"  {skipped.tier:<5} {skipped.rule} ({skipped.source}): {skipped.reason}")
    if agent == "claude" and any(r.tier in ("deny", "ask") for r in rules.imported):
        out.say(DENY_RULES_NOTE)


def _register(out: _Report, root: Path, agent: str | None) -> None:
    from keel.core.userstate import register_workspace

    try:
        register_workspace(str(root), agent)
    except OSError as exc:  # the workspace works; only `keel stop --all` will not reach it
        out.warn(f"warning: could not record {root} for `keel stop --all`: {exc}")


def _codex_trust(out: _Report, root: Path, trust: bool) -> None:
    from keel.hook.codex_config import codex_config_path, hook_reviews, trust_project
    from keel.hook.codex_config import project_trust as trust_of

    if trust:
        done = trust_project(root)
        out.data["codex"] = {
            "trusted": True,
            "recorded": done.changed,
            "config": str(done.config),
            "sandbox_mode": done.sandbox_mode,
        }
        if done.changed:
            out.say(f'recorded trust in {done.config}: [projects."{root}"] trust_level = "trusted"')
        else:
            out.say(f"Codex trusts this project already ({done.config})")
        mode = done.sandbox_mode or "(not set)"
        out.say(f"left Codex's own sandbox_mode as it was: {mode}")
    else:
        try:
            level = trust_of(root)
        except KeelError as exc:  # the hooks are registered; only the check could not be made
            out.data["codex"] = {"trusted": None}
            out.warn(f"WARNING: cannot tell whether Codex trusts {root}: {exc.message}")
            return
        out.data["codex"] = {"trusted": level == "trusted", "config": str(codex_config_path())}
        if level != "trusted":
            out.warn(
                f"WARNING: Codex does not trust {root} ({codex_config_path()}), so it will NOT "
                "run keel's hooks here and nothing is guarded. Run `keel init --agent codex "
                "--trust` to record trust, or start codex here and trust the folder."
            )
    reviewed = bool(hook_reviews(root))
    out.data["codex"]["hooks_reviewed"] = reviewed
    if not reviewed:
        out.say(
            "Codex also runs project hooks only once they were reviewed: review them with "
            "/hooks in the Codex TUI; `codex exec` runs them unreviewed only with "
            "--dangerously-bypass-hook-trust."
        )
