"""Every verdict of ``check_path``, whole: decision, rule, reason and suggestion.

Those texts are what the agent reads. The path forms are made real where it matters: symlinks
in a 0755 workspace, a home directory of the test's own (``tree``). Reads, writes and stats;
sandboxed shell commands; ``read_outside``; control files, constraints, protected globs,
scope and presets on writes.
"""

from __future__ import annotations

import os
import sys

import pytest
from policy_helpers import CONTROL_HINT, Tree

from keel.core.protected import OWN_REASON
from keel.policy import Policy
from keel.policy._core import Engine
from keel.policy._snapshot import default_snapshot

READ_HINT = "read files inside the workspace, or add a glob to [policy] read_outside"
WRITE_HINT = "write only inside the workspace"
SECRET_HINT = "do not read credentials; ask the user for what you need"
GIT_CONFIG_WHY = "git runs programs it names (core.fsmonitor, hooksPath, filters, diff)"
SCOPE_HINT = "change only files in scope, or widen [scope] in keel.toml"
PROTECTED_HINT = "protected files are changed by people, not agents"


def _cases(t: Tree) -> list[tuple[str, str, tuple[str, str, str, str | None]]]:
    ws, out, home = str(t.ws), str(t.out), str(t.home)
    return [
        ("", "read", ("deny", "path.empty", "the path is empty", "name a file in the workspace")),
        (" ", "write", ("deny", "path.empty", "the path is empty", "name a file in the workspace")),
        ("a" * 4097, "read", ("deny", "path.too_long", "the path is over 4096 characters", None)),
        ("a%00b", "read", ("deny", "path.nul", "'a%00b' decodes to a NUL byte", None)),
        ("a\x00b", "read", ("deny", "input.nul", "the path contains a NUL byte",
                             "remove the NUL byte")),
        ("a\nb", "read", ("deny", "path.control_char",
                          "'a\\nb' contains or decodes to a control character",
                          "name files without control characters")),
        ("a\x7fb", "read", ("deny", "path.control_char",
                            "'a\\x7fb' contains or decodes to a control character",
                            "name files without control characters")),
        ("a b", "read", ("allow", "path.read", "'a b' is inside the workspace", None)),
        ("src/a.py", "read", ("allow", "path.read", "'src/a.py' is inside the workspace", None)),
        ("src/a.py", "stat", ("allow", "path.read", "'src/a.py' is inside the workspace", None)),
        ("src/a.py", "write", ("allow", "path.in_scope",
                               "'src/a.py' is inside the workspace and in scope", None)),
        ("src/a.py", "edit", ("allow", "path.in_scope",
                              "'src/a.py' is inside the workspace and in scope", None)),
        (f"{ws}/src/a.py", "write", ("allow", "path.in_scope",
                                     f"'{ws}/src/a.py' is inside the workspace and in scope",
                                     None)),
        ("link_in/a.py", "write", ("allow", "path.in_scope",
                                   "'link_in/a.py' is inside the workspace and in scope", None)),
        ("C:\\x", "read", ("deny", "path.outside_workspace",
                           "'C:\\\\x' is a Windows drive or network path",
                           "use a path inside the workspace")),
        ("//srv/x", "write", ("deny", "path.outside_workspace",
                              "'//srv/x' is a Windows drive or network path",
                              "use a path inside the workspace")),
        ("/dev/null", "write", ("allow", "path.device", "/dev/null is a standard device", None)),
        ("/dev/../dev/null", "write", ("allow", "path.device",
                                       "/dev/null is a standard device", None)),
        ("/dev/zero", "read", ("allow", "path.device", "/dev/zero is a standard device", None)),
        ("/dev/zero", "stat", ("allow", "path.device", "/dev/zero is a standard device", None)),
        ("/dev/zero", "write", ("deny", "path.outside_workspace",
                                "'/dev/zero' resolves outside the workspace (/dev/zero)",
                                WRITE_HINT)),
        ("/dev/tcp/evil.test/80", "read", ("deny", "network.not_allowed",
                                           "evil.test is not on the network allowlist",
                                           "add the host to [policy] network_allow in keel.toml")),
        ("/dev/udp/evil.test/53", "write", ("deny", "network.not_allowed",
                                            "evil.test is not on the network allowlist",
                                            "add the host to [policy] network_allow in keel.toml")),
        ("/dev/tcp/pypi.org/443", "write", ("allow", "network.allowed",
                                            "pypi.org is on the network allowlist", None)),
        ("/dev/tcp/pypi.org", "read", ("allow", "network.allowed",
                                       "pypi.org is on the network allowlist", None)),
        ("/dev/tcp/exa mple/80", "read", ("deny", "network.bad_url",
                                          "cannot read a host name in '/dev/tcp/exa mple/80'",
                                          "use a plain http(s) URL")),
        (".env", "read", ("deny", "risk.secret_read", f"'.env' is a secret ({ws}/.env)",
                          SECRET_HINT)),
        (".ENV", "read", ("deny", "risk.secret_read", f"'.ENV' is a secret ({ws}/.ENV)",
                          SECRET_HINT)),
        (".env", "stat", ("allow", "path.read", "'.env' is inside the workspace", None)),
        (".env.example", "read", ("allow", "path.read",
                                  "'.env.example' is inside the workspace", None)),
        (".ENV.EXAMPLE", "read", ("allow", "path.read",
                                  "'.ENV.EXAMPLE' is inside the workspace", None)),
        ("notes.txt", "read", ("deny", "risk.secret_read", f"'notes.txt' is a secret ({ws}/.env)",
                               SECRET_HINT)),
        ("secret.key", "read", ("allow", "path.read", "'secret.key' is inside the workspace",
                                None)),
        ("id_rsa", "read", ("deny", "risk.secret_read", f"'id_rsa' is a secret ({ws}/id_rsa)",
                            SECRET_HINT)),
        ("~/.ssh/id_rsa", "read", ("deny", "risk.secret_read",
                                   f"'~/.ssh/id_rsa' is a secret ({home}/.ssh/id_rsa)",
                                   SECRET_HINT)),
        ("~/.SSH/x", "read", ("deny", "risk.secret_read",
                              f"'~/.SSH/x' is a secret ({home}/.SSH/x)", SECRET_HINT)),
        ("../out/f.txt", "read", ("deny", "path.outside_workspace",
                                  f"'../out/f.txt' resolves outside the workspace ({out}/f.txt)",
                                  READ_HINT)),
        ("../out/f.txt", "stat", ("deny", "path.outside_workspace",
                                  f"'../out/f.txt' resolves outside the workspace ({out}/f.txt)",
                                  READ_HINT)),
        ("../out/f.txt", "write", ("deny", "path.outside_workspace",
                                   f"'../out/f.txt' resolves outside the workspace ({out}/f.txt)",
                                   WRITE_HINT)),
        ("link_out/f.txt", "read", ("deny", "path.outside_workspace",
                                    "'link_out/f.txt' resolves outside the workspace "
                                    f"({ws}/link_out/f.txt -> {out}/f.txt)", READ_HINT)),
        ("/tmp/x", "write", ("deny", "path.outside_workspace",
                             "'/tmp/x' resolves outside the workspace (/tmp/x)", WRITE_HINT)),
        ("/etc/hostname", "read", ("deny", "path.outside_workspace",
                                   "'/etc/hostname' resolves outside the workspace (/etc/hostname)",
                                   READ_HINT)),
        ("/usr/include/x.h", "read", ("allow", "path.read_outside",
                                      "/usr/include/x.h matches [policy] read_outside", None)),
        (".git/config", "write", ("deny", "path.control",
                                  "'.git/config' is protected at any depth ('**/.git/config'): "
                                  + GIT_CONFIG_WHY, CONTROL_HINT)),
        (".GIT/CONFIG", "write", ("deny", "path.control",
                                  "'.GIT/CONFIG' is protected at any depth ('**/.git/config'): "
                                  + GIT_CONFIG_WHY, CONTROL_HINT)),
        ("cfg", "write", ("deny", "path.control",
                          "'.git/config' is protected at any depth ('**/.git/config'): "
                          + GIT_CONFIG_WHY, CONTROL_HINT)),
        (".husky/pre-commit", "write", ("deny", "path.control",
                                        "'.husky/pre-commit' is protected at any depth "
                                        "('**/.husky/**'): "
                                        "husky's git hooks run on git commit",
                                        CONTROL_HINT)),
        (".env", "write", ("deny", "path.protected", "'.env' is protected ('.env')",
                           PROTECTED_HINT)),
        (".ENVRC", "write", ("deny", "path.control",
                             "'.ENVRC' is protected at any depth ('**/.envrc'): "
                             "direnv runs it when a shell enters the directory", CONTROL_HINT)),
        ("src/../.env", "edit", ("deny", "path.protected", "'.env' is protected ('.env')",
                                 PROTECTED_HINT)),
    ]  # fmt: skip


def test_every_path_verdict_is_pinned_whole(tree: Tree) -> None:
    engine = tree.engine()
    got = {(raw, op): tuple(engine.check_path(raw, op)) for raw, op, _ in _cases(tree)}
    want = {(raw, op): verdict for raw, op, verdict in _cases(tree)}
    assert [k for k in want if got[k] != want[k]] == [], {
        k: got[k] for k in want if got[k] != want[k]
    }


def test_a_path_of_exactly_path_max_is_judged(tree: Tree) -> None:
    assert tuple(tree.engine().check_path("a" * 4096, "write"))[:2] == ("allow", "path.in_scope")


def test_a_u_encoded_lone_surrogate_is_judged_without_a_crash(tree: Tree) -> None:
    """``%u`` can decode to a lone surrogate; the percent decoding after it must not crash."""
    policy = Policy.for_preset("developer", tree.ws)
    decision = policy.check_path("%udcff%2e", "read")
    assert (decision.decision, decision.rule) == ("allow", "path.read")
    decision = policy.check_path("%udcff/%2e%2e/%2e%2e/etc/passwd", "read")
    assert (decision.decision, decision.rule) == ("deny", "path.outside_workspace")


def test_an_upper_case_u_encoded_traversal_is_decoded_too(tree: Tree) -> None:
    """``%U002e%U002e`` is ``..`` as ``%u002e%u002e`` is: it reached outside the workspace."""
    policy = Policy.for_preset("developer", tree.ws)
    for spelling in ("%u002e%u002e", "%U002e%U002e", "%U002E%u002E"):
        decision = policy.check_path(f"{spelling}/{spelling}/{spelling}/etc/passwd", "write")
        assert (decision.decision, decision.rule) == ("deny", "path.outside_workspace"), spelling


def test_an_invalid_percent_byte_is_replaced_not_fatal(tree: Tree) -> None:
    decision = Policy.for_preset("developer", tree.ws).check_path("%ff/%2e%2e/%2e%2e/x", "read")
    assert (decision.decision, decision.rule) == ("deny", "path.outside_workspace")
    assert tuple(tree.engine().check_path("a%ffb", "read"))[:2] == ("allow", "path.read")


def test_a_path_relative_to_an_unknown_directory_gets_the_unparseable_level(tree: Tree) -> None:
    """A shell command's cwd can be unknown (``cd $X``): a relative path is then unjudgeable."""
    reason = "'x' is relative to a directory only known at run time"
    hint = "use a path relative to the workspace root"
    for preset, level in (("developer", "ask"), ("strict", "deny")):
        engine = tree.engine(preset)
        assert tuple(engine.check_path("x", "read", None, resolved_cwd=True)) == (
            level, "path.dynamic", reason, hint,
        )  # fmt: skip
    absolute = tree.engine().check_path(str(tree.ws / "x"), "read", None, resolved_cwd=True)
    assert tuple(absolute)[:2] == ("allow", "path.read")


def test_the_cwd_is_resolved_inside_the_workspace(tree: Tree) -> None:
    engine = tree.engine(scope_include=("src/**",))
    assert tuple(engine.check_path("a.py", "write", "src"))[:2] == ("allow", "path.in_scope")
    assert tuple(engine.check_path("a.py", "write"))[:2] == ("deny", "path.out_of_scope")
    assert tuple(engine.check_path("a.py", "write", ""))[:2] == ("deny", "path.out_of_scope")
    # a cwd outside the workspace falls back to the root
    for cwd in ("/etc", "../..", str(tree.out)):
        got = tuple(tree.engine().check_path("passwd", "read", cwd))
        assert got == ("allow", "path.read", "'passwd' is inside the workspace", None), cwd
    # a cwd a shell command resolved is taken as it is
    got = tuple(tree.engine().check_path("f.txt", "read", str(tree.out), resolved_cwd=True))
    assert got[:2] == ("deny", "path.outside_workspace")


def test_a_path_through_a_link_is_judged_by_the_link_and_the_target(tree: Tree) -> None:
    engine = tree.engine()
    # `lnk/..` is the target's parent for the kernel, the workspace for a lexical reading
    got = engine.check_path("link_out/../ws/src/a.py", "read")
    assert tuple(got)[:2] == ("allow", "path.read")
    got = engine.check_path("link_out/../f.txt", "read")
    assert tuple(got) == (
        "deny", "path.outside_workspace",
        f"'link_out/../f.txt' resolves outside the workspace "
        f"({tree.ws}/f.txt -> {tree.base}/f.txt)", READ_HINT,
    )  # fmt: skip


def test_sandboxed_reads_and_writes_outside_the_workspace(tree: Tree) -> None:
    engine = tree.engine()

    def sandboxed(raw: str, op: str) -> tuple[str | None, ...]:
        return tuple(engine.check_path(raw, op, str(tree.ws), resolved_cwd=True, sandboxed=True))

    assert sandboxed("/etc/hostname", "read") == (
        "allow", "path.read_contained",
        "/etc/hostname is outside the workspace; keel's sandbox shows it read-only, if at all",
        None,
    )  # fmt: skip
    assert sandboxed("/etc/hostname", "stat")[:2] == ("allow", "path.read_contained")
    assert sandboxed("/etc/shadow", "read")[:2] == ("deny", "risk.secret_read")
    # a listing of a secret outside is no secret read, but the sandbox does not show it
    for raw, shown in (
        ("/etc/shadow", "/etc/shadow"),
        (f"{tree.out}/key_link", f"{tree.out}/key_link -> {tree.home}/.ssh/id_rsa"),
    ):
        assert sandboxed(raw, "stat") == (
            "deny", "path.outside_workspace",
            f"{raw!r} resolves outside the workspace ({shown})", READ_HINT,
        )  # fmt: skip
    assert sandboxed("/tmp/x", "write") == (
        "allow", "path.tmp_contained",
        "'/tmp/x' is in /tmp, which is private to each contained command", None,
    )  # fmt: skip
    for raw in ("/var/tmp/x", f"{tree.out}/etc/x"):
        assert sandboxed(raw, "write")[:2] == ("deny", "path.outside_workspace"), raw
    # the same calls from a file tool (never sandboxed, the default)
    assert tuple(engine.check_path("/etc/hostname", "read"))[:2] == (
        "deny", "path.outside_workspace",
    )  # fmt: skip
    assert tuple(engine.check_path("/tmp/x", "write"))[:2] == ("deny", "path.outside_workspace")


def test_a_contained_shell_command_reads_outside_but_not_secrets(tree: Tree) -> None:
    engine = tree.engine(contained=True)
    assert engine.check_line("cat /etc/hostname").decision == "allow"
    assert tuple(engine.check_line(f"cat {tree.out}/key_link"))[:2] == (
        "deny", "risk.secret_read",
    )  # fmt: skip


def test_read_outside_needs_the_written_and_the_real_path_to_match(tree: Tree) -> None:
    (tree.out / "esc").symlink_to(tree.base / "home")
    engine = tree.engine(read_outside=(f"{tree.out}/**", "~/docs/**"))
    assert tuple(engine.check_path(f"{tree.out}/f.txt", "read")) == (
        "allow", "path.read_outside", f"{tree.out}/f.txt matches [policy] read_outside", None,
    )  # fmt: skip
    assert tuple(engine.check_path(f"{tree.out}/esc/x", "read"))[:2] == (
        "deny", "path.outside_workspace",
    )  # fmt: skip
    assert tuple(engine.check_path("~/docs/a.md", "read"))[:2] == ("allow", "path.read_outside")
    assert tuple(engine.check_path(f"{tree.out}/f.txt", "write"))[:2] == (
        "deny", "path.outside_workspace",
    )  # fmt: skip
    assert "/usr/include/**" in tree.engine().read_outside.globs
    # the leading slash only is taken off before matching (a root directory named X...)
    upper = tree.engine(read_outside=("/Xdir/**",))
    assert tuple(upper.check_path("/Xdir/a", "read"))[:2] == ("allow", "path.read_outside")


def test_a_home_secret_is_found_whatever_the_home_is_named(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", "/Xhome")
    got = tuple(tree.engine().check_path("~/.aws/credentials", "read"))
    assert got == (
        "deny", "risk.secret_read", "'~/.aws/credentials' is a secret (/Xhome/.aws/credentials)",
        SECRET_HINT,
    )  # fmt: skip


def test_read_only_directories_are_control_at_any_depth_below_them(tree: Tree) -> None:
    engine = tree.engine(read_only=("vendor",))
    for raw in ("vendor", "vendor/x.py", "vendor/a/b/c.py", "lib/vendor/a/b/c.py"):
        got = tuple(engine.check_path(raw, "write"))
        assert got == (
            "deny", "path.control",
            f"{raw!r} is protected at any depth ('vendor'): [sandbox] read_only in keel.toml",
            CONTROL_HINT,
        ), raw  # fmt: skip
    assert tuple(engine.check_path("vendors/x.py", "write"))[:2] == ("allow", "path.in_scope")


def test_constraints_protect_their_globs_case_insensitively(tree: Tree) -> None:
    engine = tree.engine(constraints=(("mig", "no migrations", ("db/**",), ("alembic",)),))
    for raw in ("db/1.sql", "DB/1.sql"):
        assert tuple(engine.check_path(raw, "write")) == (
            "deny", "constraint.mig", f"{raw!r} is protected by constraint mig: no migrations",
            "leave this file alone; the constraint is in keel.toml",
        )  # fmt: skip
    assert tuple(engine.check_path("db/1.sql", "read"))[:2] == ("allow", "path.read")
    assert tuple(engine.check_line("alembic upgrade"))[:2] == ("deny", "constraint.mig")


def test_protected_globs_replace_the_default_set(tree: Tree) -> None:
    engine = tree.engine(protected=("docs/**",))
    assert tuple(engine.check_path("DOCS/x.md", "write")) == (
        "deny", "path.protected", "'DOCS/x.md' is protected ('docs/**')", PROTECTED_HINT,
    )  # fmt: skip
    assert tuple(engine.check_path(".env", "write"))[:2] == ("allow", "path.in_scope")
    assert tuple(engine.check_path(".git/config", "write"))[:2] == ("deny", "path.control")


def test_scope_include_and_exclude_on_writes(tree: Tree) -> None:
    engine = tree.engine(scope_include=("src/**",), scope_exclude=("src/vendor/**",))
    for raw in ("docs/x.md", "src/vendor/x.py"):
        assert tuple(engine.check_path(raw, "write")) == (
            "deny", "path.out_of_scope", f"{raw!r} is outside the task's [scope]", SCOPE_HINT,
        )  # fmt: skip
    assert tuple(engine.check_path("src/x.py", "write"))[:2] == ("allow", "path.in_scope")
    assert tuple(engine.check_path("docs/x.md", "read"))[:2] == ("allow", "path.read")


def test_a_preset_without_file_writes_denies_them(tree: Tree) -> None:
    engine = tree.engine("readonly")
    assert tuple(engine.check_path("src/a.py", "write")) == (
        "deny", "preset.readonly.no_writes", "the readonly preset allows no writes", None,
    )  # fmt: skip
    assert tuple(engine.check_path("src/a.py", "read"))[:2] == ("allow", "path.read")
    assert tree.engine("strict").check_path("src/a.py", "write").decision == "allow"


def test_ci_files_are_control_unless_protect_ci_is_off(tree: Tree) -> None:
    on, off = tree.engine(), tree.engine(protect_ci=False)
    assert tuple(on.check_path(".husky/x", "write"))[:2] == ("deny", "path.control")
    assert tuple(off.check_path(".husky/x", "write"))[:2] == ("allow", "path.in_scope")
    # off means the agent may change CI: the file tools and keel exec agree (one table)
    assert tuple(off.check_path(".github/workflows/ci.yml", "write"))[:2] == (
        "allow", "path.in_scope",
    )  # fmt: skip


def test_a_snapshot_without_the_sandbox_keys_keeps_ci_files_and_no_read_only(tree: Tree) -> None:
    """Snapshots made before ``protect_ci``/``read_only`` existed: the safe defaults apply."""
    snap = default_snapshot("developer")
    del snap["protect_ci"], snap["read_only"]
    engine = Engine(snap, str(tree.ws))
    assert tuple(engine.check_path(".husky/x", "write"))[:2] == ("deny", "path.control")
    assert tuple(engine.check_path("vendor/x", "write"))[:2] == ("allow", "path.in_scope")
    assert "**/.husky/**" in engine.explain()["paths"]["control"]


PROMPT_WHY = "the next agent session reads it as its instructions"
PROMPT_HINT = "a person reviews changes to the instructions of future agent sessions"


@pytest.mark.parametrize(
    ("raw", "glob"),
    [
        ("CLAUDE.md", "**/CLAUDE.md"),
        ("docs/AGENTS.md", "**/AGENTS.md"),
        (".github/copilot-instructions.md", "**/.github/copilot-instructions.md"),
    ],
)
def test_writing_a_prompt_file_asks(tree: Tree, raw: str, glob: str) -> None:
    assert tuple(tree.engine().check_path(raw, "write")) == (
        "ask", "path.prompt_file", f"{raw!r} is a prompt file ({glob!r}): {PROMPT_WHY}",
        PROMPT_HINT,
    )  # fmt: skip
    assert tuple(tree.engine().check_path(raw, "read"))[:2] == ("allow", "path.read")


def test_with_protect_ci_off_a_prompt_file_in_a_ci_directory_asks(tree: Tree) -> None:
    on, off = tree.engine(), tree.engine(protect_ci=False)
    assert tuple(on.check_path(".husky/CLAUDE.md", "write"))[:2] == ("deny", "path.control")
    assert tuple(off.check_path(".husky/CLAUDE.md", "write")) == (
        "ask", "path.prompt_file",
        f"'.husky/CLAUDE.md' is a prompt file ('**/CLAUDE.md'): {PROMPT_WHY}", PROMPT_HINT,
    )  # fmt: skip


def test_a_read_only_ci_directory_with_protect_ci_off_gives_read_only_as_the_reason(
    tree: Tree,
) -> None:
    engine = tree.engine(protect_ci=False, read_only=(".husky",))
    assert tuple(engine.check_path(".husky/x", "write")) == (
        "deny", "path.control",
        "'.husky/x' is protected at any depth ('.husky'): [sandbox] read_only in keel.toml",
        CONTROL_HINT,
    )  # fmt: skip


def test_keels_own_installation_in_the_workspace_is_control(tree: Tree) -> None:
    # A workspace holding the interpreter's prefix (a project's .venv): the hooks run it.
    prefix = os.path.realpath(sys.prefix)
    engine = Engine(default_snapshot("developer"), os.path.dirname(prefix))
    rel = f"{os.path.basename(prefix)}/lib/x.pth"
    assert tuple(engine.check_path(rel, "write")) == (
        "deny", "path.control",
        f"{rel!r} is protected at any depth ('{os.path.basename(prefix)}/**'): {OWN_REASON}",
        CONTROL_HINT,
    )  # fmt: skip


def test_explain_leaves_ci_files_out_of_control_when_protect_ci_is_off(tree: Tree) -> None:
    on, off = tree.engine().explain()["paths"], tree.engine(protect_ci=False).explain()["paths"]
    assert "**/.husky/**" in on["control"] and "**/.husky/**" not in off["control"]
    assert "**/.github/workflows/**" not in off["control"]
    assert "**/CLAUDE.md" in off["prompt_files"] and off["prompt_files"] == on["prompt_files"]
