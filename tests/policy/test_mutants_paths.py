"""Mutation-testing survivors of the path rules (issue 14, tests/MUTATION.md), killed in-process.

Every verdict of ``check_path`` is pinned whole (decision, rule, reason, suggestion): those
texts are what the agent reads. The path forms are made real where it matters: symlinks in a
0755 workspace, a home directory of the test's own. The helpers of ``keel.policy._paths``
(decodings, forms, ``~``, globs) are pinned directly, each by the rule its docstring states.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from keel.policy import Policy
from keel.policy._core import Engine
from keel.policy._paths import (
    GlobSet,
    absolute_forms,
    decodings,
    expand_home,
    glob_to_regex,
    inside,
    is_foreign_absolute,
    relative,
    variants,
)
from keel.policy._snapshot import default_snapshot

READ_HINT = "read files inside the workspace, or add a glob to [policy] read_outside"
WRITE_HINT = "write only inside the workspace"
SECRET_HINT = "do not read credentials; ask the user for what you need"
GIT_CONFIG_WHY = "git runs programs it names (core.fsmonitor, hooksPath, filters, diff)"
CONTROL_HINT = (
    "keel's, git's, the agents' and the tools' configuration is changed by people, not agents"
)
SCOPE_HINT = "change only files in scope, or widen [scope] in keel.toml"
PROTECTED_HINT = "protected files are changed by people, not agents"


class Tree:
    """A workspace ``ws`` with real symlinks, a directory ``out`` beside it and a home."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.ws = base / "ws"
        self.out = base / "out"
        self.home = base / "home"
        for d in (self.ws / "src", self.ws / ".git", self.out, self.home / ".ssh"):
            d.mkdir(parents=True)
        (self.ws / "src" / "a.py").write_text("x = 1\n")
        (self.ws / ".git" / "config").write_text("[core]\n")
        (self.ws / ".env").write_text("KEY=1\n")
        (self.ws / "plain.txt").write_text("hello\n")
        (self.out / "f.txt").write_text("out\n")
        (self.home / ".ssh" / "id_rsa").write_text("KEY\n")
        links = {
            self.ws / "link_out": self.out,  # a directory outside
            self.ws / "link_in": self.ws / "src",  # a directory inside
            self.ws / "cfg": self.ws / ".git" / "config",  # a control file
            self.ws / "notes.txt": self.ws / ".env",  # a secret
            self.ws / "secret.key": self.ws / "plain.txt",  # a plain file named like a key
            self.out / "key_link": self.home / ".ssh" / "id_rsa",  # outside, to a secret
            self.out / "etc": Path("/etc"),  # in /tmp, to outside /tmp
        }
        for link, target in links.items():
            link.symlink_to(target)

    def engine(self, preset: str = "developer", *, contained: bool = False, **over: Any) -> Engine:
        """An engine over ``ws`` for ``preset``, with snapshot keys replaced by ``over``."""
        return Engine(default_snapshot(preset) | over, str(self.ws), contained=contained)


@pytest.fixture
def tree(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tree]:
    t = Tree(workdir)
    monkeypatch.setenv("HOME", str(t.home))
    monkeypatch.delenv("CDPATH", raising=False)
    yield t


# -- check_path: every verdict, whole -----------------------------------------------------------


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


# -- sandboxed (a shell command inside keel exec) ------------------------------------------------


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


# -- read_outside ------------------------------------------------------------------------------


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


# -- writes: control set, constraints, protected, scope, preset ----------------------------------


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


# -- in_scope ----------------------------------------------------------------------------------


def test_in_scope_by_every_form(tree: Tree) -> None:
    (tree.ws / "src" / "to_docs").symlink_to(tree.ws / "docs")
    engine = tree.engine(scope_include=("src/**",), scope_exclude=("src/vendor/**",))
    yes = ("src/a.py", f"{tree.ws}/src/new.py", "src/x%2epy")
    no = (
        "", " ", "docs/x", "link_in/a.py", "src/vendor/x", "C:\\src\\a.py", "src/%2e%2e/docs/x",
        "../ws/docs/x", "src/to_docs/x", "link_out/f.txt", "a\x00b", "\udcff",
    )  # fmt: skip
    assert [p for p in yes if not engine.in_scope(p)] == []
    assert [p for p in no if engine.in_scope(p)] == []
    everything = tree.engine()  # scope "**": only the link's target being outside says no
    assert everything.in_scope("link_in/a.py") and not everything.in_scope("link_out/f.txt")


# -- the Engine's compiled settings --------------------------------------------------------------


def test_the_engine_compiles_the_snapshot(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = tree.engine(
        unknown="deny", unparseable="deny", network_allow=("x.test",), max_input_bytes=50
    )
    assert (engine.unknown, engine.unparseable) == ("deny", "deny")
    assert engine.network[-1] == "x.test" and "pypi.org" in engine.network
    assert engine.root == str(tree.ws) and engine.root_real == str(tree.ws)
    assert engine.home == str(tree.home)
    assert tuple(engine.check_path("a" * 51, "read"))[:2] == ("deny", "input.too_large")
    assert (engine.command_writes, engine.file_writes, engine.runs_code) == (True, True, False)
    assert tree.engine(contained=True).runs_code is True
    assert tree.engine("strict", contained=True).runs_code is False
    assert tree.engine(preset="strict").preset == "strict"
    assert Engine(default_snapshot("strict"), str(tree.ws), "readonly").preset == "readonly"
    assert tree.engine().cdpath is False
    monkeypatch.setenv("CDPATH", "/x")
    assert tree.engine().cdpath is True


def test_a_root_given_through_a_link_is_compared_in_both_forms(tree: Tree) -> None:
    link = tree.base / "ws_link"
    link.symlink_to(tree.ws)
    engine = Engine(default_snapshot("developer"), str(link / "."))
    assert (engine.root, engine.root_real) == (str(link), str(tree.ws))
    assert tuple(engine.check_path("src/a.py", "write"))[:2] == ("allow", "path.in_scope")
    assert tuple(engine.check_path(f"{link}/src/a.py", "read"))[:2] == ("allow", "path.read")
    assert tuple(engine.check_path("cfg", "write"))[:2] == ("deny", "path.control")


def test_tier_reasons_name_the_preset_and_the_mode(tree: Tree) -> None:
    plain, contained = tree.engine(), tree.engine(contained=True)
    assert tuple(plain.check_line("ls")) == (
        "allow", "preset.developer.allow", "matches 'ls' in the developer preset", None,
    )  # fmt: skip
    assert tuple(contained.check_line("ls"))[2] == (
        "matches 'ls' in the developer preset (contained)"
    )
    assert tuple(contained.tier(["ls"], tool=True))[2] == "matches 'ls' in the developer preset"
    config = tree.engine(allow=("make lint",), ask=("make x",), deny=("make clean",))
    assert tuple(config.check_line("make lint"))[:3] == (
        "allow", "config.allow", "matches 'make lint' in keel.toml [policy]",
    )  # fmt: skip
    assert tuple(config.check_line("make x"))[:2] == ("ask", "config.ask")
    assert tuple(config.check_line("make clean"))[:2] == ("deny", "config.deny")


# -- _paths helpers --------------------------------------------------------------------------------


def _encoded(times: int) -> str:
    text = "%2e"
    for _ in range(times):
        text = text.replace("%", "%25")
    return text


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a", ["a"]),
        ("%252e", ["%252e", "%2e", "."]),
        ("&#46;&#46;/x", ["&#46;&#46;/x", "../x"]),
        ("a&ltb", ["a&ltb"]),  # an entity needs its semicolon
        ("a;b", ["a;b"]),
        ("%u002e%u002e/x", ["%u002e%u002e/x", "../x"]),
        ("%U002e%U002e/x", ["%U002e%U002e/x", "../x"]),
        ("0x2e0x2e/x", ["0x2e0x2e/x", "../x"]),
        ("0X2E0X2F", ["0X2E0X2F", "./"]),
        ("..%c0%afx", ["..%c0%afx", "../x"]),
        ("%2E%2e", ["%2E%2e", ".."]),
        ("a%ffb", ["a%ffb", "a\ufffdb"]),
        ("%udcff%2e", ["%udcff%2e", "\ufffd\ufffd\ufffd."]),
        (_encoded(7), [_encoded(7 - i) for i in range(8)] + ["."]),
    ],
)
def test_decodings(text: str, want: list[str]) -> None:
    assert decodings(text) == want


def test_decodings_stop_after_eight_rounds() -> None:
    assert decodings(_encoded(9)) == [_encoded(9 - i) for i in range(9)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a", ["a"]),
        ("a\\b", ["a\\b", "a/b"]),
        ("a;x/b;y", ["a;x/b;y", "a/b"]),
        ("..;/x", ["..;/x", "../x"]),
        ("%2e%2e\\x", ["%2e%2e\\x", "%2e%2e/x", "..\\x", "../x"]),
        ("\uff0e\uff0e/x", ["\uff0e\uff0e/x", "../x"]),
        ("..\uff3cx", ["..\uff3cx", "..\\x", "../x"]),
        ("\ufb01le", ["\ufb01le", "file"]),
        ("file:///etc/passwd", ["file:///etc/passwd", "/etc/passwd"]),
        ("FILE:///etc/passwd", ["FILE:///etc/passwd", "/etc/passwd"]),
        ("file://localhost/etc/x", ["file://localhost/etc/x", "/etc/x"]),
        ("file://LocalHost/etc/x", ["file://LocalHost/etc/x", "/etc/x"]),
        ("file://srv/x", ["file://srv/x", "//srv/x"]),
        ("file:x", ["file:x", "x"]),
        ("file:%2e%2e/x", ["file:%2e%2e/x", "file:../x", "%2e%2e/x", "../x"]),
    ],
)
def test_variants(text: str, want: list[str]) -> None:
    assert variants(text) == want


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("~", "/h"),
        ("~/x", "/h/x"),
        ("~root/x", "/root/x"),
        ("$HOME", "/h"),
        ("$HOME/x", "/h/x"),
        ("${HOME}", "/h"),
        ("${HOME}/x", "/h/x"),
        ("$HOMEX/y", "$HOMEX/y"),
        ("$home/x", "$home/x"),
        ("x/~", "x/~"),
        ("/a", "/a"),
    ],
)
def test_expand_home(path: str, want: str) -> None:
    assert expand_home(path, "/h") == want


@pytest.mark.parametrize(
    ("path", "want"),
    [("C:\\x", True), ("c:/x", True), ("\\\\srv\\x", True), ("//srv/x", True),
     ("///x", False), ("/x", False), ("x", False), ("x/c:", False)],
)  # fmt: skip
def test_is_foreign_absolute(path: str, want: bool) -> None:
    assert is_foreign_absolute(path) is want


def test_absolute_forms(tree: Tree) -> None:
    ws = str(tree.ws)
    assert absolute_forms("/a/./b/", "/c") == ("/a/b", "/a/b")
    assert absolute_forms("b", "/c") == ("/c/b", "/c/b")
    assert absolute_forms("//x", "/") == ("/x", "/x")
    assert absolute_forms("//Xx/y", "/") == ("/Xx/y", "/Xx/y")  # only the slashes go
    assert absolute_forms("cfg", ws) == (f"{ws}/cfg", f"{ws}/.git/config")
    assert absolute_forms("link_out/../x", ws) == (f"{ws}/x", f"{tree.base}/x")
    assert absolute_forms("link_in/../a.py", ws) == (f"{ws}/a.py", f"{ws}/a.py")


@pytest.mark.parametrize(
    ("path", "root", "want"),
    [("/a", "/a", True), ("/a/b", "/a", True), ("/ab", "/a", False), ("/a", "/a/b", False),
     ("/x", "/", True), ("/a/b", "/aX", False), ("/aX/b", "/aX", True)],
)  # fmt: skip
def test_inside(path: str, root: str, want: bool) -> None:
    assert inside(path, root) is want


@pytest.mark.parametrize(
    ("path", "root", "want"),
    [("/a", "/a", "."), ("/a/b/c", "/a", "b/c"), ("/x", "/", "x"), ("/ab/c", "/ab/", "c")],
)
def test_relative(path: str, root: str, want: str) -> None:
    assert relative(path, root) == want


# glob -> (paths it matches, paths it does not)
GLOBS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("*.py", ("a.py", "d/a.py", "d/e/.py"), ("a.pyc", "a.py/x", "apy")),
    ("a*.py", ("a.py", "ab.py"), ("b.py", "xa.py")),
    ("?.txt", ("a.txt", "d/b.txt"), ("ab.txt", ".txt", "/.txt")),
    ("/top.txt", ("top.txt",), ("d/top.txt",)),
    ("d/*.py", ("d/a.py",), ("x/d/a.py", "d/e/a.py")),
    ("ab/**", ("ab", "ab/x", "ab/x/y"), ("abx", "a", "x/ab")),
    ("**/x", ("x", "a/b/x"), ("xa", "a/xb")),
    ("a/**/b", ("a/b", "a/x/b", "a/x/y/b"), ("b", "a/xb", "ab")),
    ("a/**/**/b", ("a/b", "a/x/y/b"), ("ab",)),
    ("a/**/**", ("a", "a/x", "a/x/y"), ("ax",)),
    ("**/**/x", ("x", "a/x"), ("ax",)),
    ("dir/", ("dir", "x/dir"), ("dirx", "dir/y")),
    ("/", ("a", "a/b"), ()),
    ("**", ("a", "a/b", "a\nb"), ()),
    ("[ab].txt", ("a.txt", "b.txt"), ("c.txt", "[ab].txt")),
    ("a.b", ("a.b",), ("axb",)),
    # an upper-case X next to a slash is a letter like any other
    ("/Xa", ("Xa",), ("a", "d/Xa")),
    ("a/X", ("a/X",), ("d/a/X", "a")),
    ("aX", ("aX", "d/aX"), ("a",)),
]


@pytest.mark.parametrize(("glob", "yes", "no"), GLOBS)
def test_glob_matching(glob: str, yes: tuple[str, ...], no: tuple[str, ...]) -> None:
    globs = GlobSet((glob,))
    assert [p for p in yes if globs.match(p) != glob] == []
    assert [p for p in no if globs.match(p) is not None] == []


def test_a_glob_anchored_at_the_root_by_request() -> None:
    assert glob_to_regex("a.py", anchored_any_depth=False) == "a\\.py"
    assert glob_to_regex("a.py") == "(?:.*/)?a\\.py"
    assert glob_to_regex("d/a.py") == "d/a\\.py"


def test_a_glob_set_names_the_glob_that_matched() -> None:
    globs = GlobSet(("*.py", "*.txt", "docs/**"))
    assert [globs.match(p) for p in ("a.py", "a.txt", "docs/x", "a.md")] == [
        "*.py", "*.txt", "docs/**", None,
    ]  # fmt: skip
    many = GlobSet(tuple(f"f{i}" for i in range(12)))
    assert many.match("f11") == "f11" and many.match("d/f10") == "f10"
    assert GlobSet(()).match("a") is None and GlobSet(()).globs == ()
    assert GlobSet(("x",)).globs == ("x",)


def test_a_glob_set_ignores_case_only_when_asked() -> None:
    assert GlobSet(("*.PY",)).match("a.py") is None
    assert GlobSet(("*.PY",), ignore_case=True).match("a.py") == "*.PY"
    exact = GlobSet(("a",))
    assert exact.match("a") == "a" and exact.match("a") == "a"  # compiled once, used twice


# -- command tiers: indexes, contained allow, caches -----------------------------------------------


def test_a_pattern_whose_first_word_is_a_glob_still_matches(tree: Tree) -> None:
    engine = tree.engine(deny=("g* push",), allow=("m?ke lint",))
    assert tuple(engine.check_line("git push")) == (
        "deny", "config.deny", "matches 'g* push' in keel.toml [policy]", "do not run this",
    )  # fmt: skip
    assert tuple(engine.check_line("make lint"))[:2] == ("allow", "config.allow")
    # the pattern named by the command's own word is tried first, and reported
    both = tree.engine(ask=("g* push", "git push"))
    assert tuple(both.check_line("git push"))[:3] == (
        "ask", "config.ask", "matches 'git push' in keel.toml [policy]",
    )  # fmt: skip


def test_the_contained_allow_list_applies_to_contained_commands_only(tree: Tree) -> None:
    plain, contained = tree.engine(), tree.engine(contained=True)
    assert tuple(contained.check_line("python x.py")) == (
        "allow", "preset.developer.allow", "matches 'python' in the developer preset (contained)",
        None,
    )  # fmt: skip
    assert tuple(plain.check_line("python x.py"))[:2] == ("ask", "default.ask")
    # a client tool never runs in the sandbox: the contained list never allows it
    assert tuple(contained.tier(["python"], tool=True))[:2] == ("ask", "default.ask")
    preset = contained.explain()["commands"]["preset"]["allow"]
    assert "python" in preset and "python" not in plain.explain()["commands"]["preset"]["allow"]


def test_each_preset_keeps_its_own_tiers(tree: Tree) -> None:
    tiers = {
        (p, c): tree.engine(p, contained=c).explain()["commands"]["preset"]
        for p in ("developer", "strict", "readonly")
        for c in (False, True)
    }
    assert "pytest" in tiers[("developer", False)]["allow"]
    assert "pytest" not in tiers[("strict", False)]["allow"]
    assert tiers[("strict", False)]["deny"] and not tiers[("readonly", False)]["deny"]
    assert tiers[("readonly", False)]["ask"] == tiers[("strict", False)]["deny"]
    assert tiers[("developer", True)] != tiers[("developer", False)]
    assert tiers[("strict", True)] == tiers[("strict", False)]


def test_read_only_needs_the_inspection_ask_list_and_literal_words(tree: Tree) -> None:
    engine = tree.engine()
    not_read_only = (
        "git reflog delete x", "git fsck --lost-found", "git $X", "git $X status",
        # an inspection command that runs a program or writes a file through an option
        "less +!sh f", "less -o log f", "less --log-file=x f", "file -C -m x",
        "ag --pager=x y", "ack --pager=x y",
    )  # fmt: skip
    for line in not_read_only:
        assert not engine.is_read_only(line), line
    assert engine.is_read_only("git reflog") and engine.is_read_only("ls $X")
    # sed printing standard input; `>& -` closes stdout like `>&-`
    for line in ("sed -n 1p", "cat a | sed -n 1,5p", "cat a >& -"):
        assert engine.is_read_only(line), line


def test_a_double_star_glob_without_a_slash_matches_at_any_depth() -> None:
    # gitignore: "**.pem" is "*.pem" at any depth (a protected glob must not miss nested keys).
    assert GlobSet(("**.pem",)).match("certs/x.pem") == "**.pem"
    assert GlobSet(("**.pem",)).match("x.pem") == "**.pem"
    assert GlobSet(("**",)).match("a/b") == "**"


# glob -> its regular expression, anchored at the root: a "[" class, "]" first in the class,
# "!" negation, backslashes inside the class, and text before a class or "?" is kept.
GLOB_REGEXES: list[tuple[str, str]] = [
    ("a?.txt", "a[^/]\\.txt"),
    ("[]a]", "[]a]"),
    ("[]ab]", "[]ab]"),
    ("[]a]*]", "[]a][^/]*\\]"),
    ("[]]*]", "[]][^/]*\\]"),
    ("[a]*]", "[a][^/]*\\]"),
    ("[a\\]", "[a\\\\]"),
    ("[!a]", "[^a]"),
    ("x[ab]y", "x[ab]y"),
]


@pytest.mark.parametrize(("glob", "want"), GLOB_REGEXES)
def test_a_glob_class_becomes_a_regex_class(glob: str, want: str) -> None:
    assert glob_to_regex(glob, anchored_any_depth=False) == want


# glob -> (paths it matches, paths it does not), for the classes above
CLASS_GLOBS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("a?.txt", ("ab.txt", "d/ab.txt"), ("b.txt", "a.txt")),
    ("[!a].txt", ("b.txt", "!.txt"), ("a.txt",)),
    ("x[ab]", ("xa", "d/xb"), ("a", "xc")),
    ("[]a]*]", ("axy]", "]]"), ("]", "b]")),
    ("[a\\]", ("a", "\\"), ("b",)),
    # "**X" is "*X" at any depth, like "**.pem"
    ("**X", ("X", "aX", "d/aX"), ("Xa",)),
]


@pytest.mark.parametrize(("glob", "yes", "no"), CLASS_GLOBS)
def test_glob_classes_match(glob: str, yes: tuple[str, ...], no: tuple[str, ...]) -> None:
    globs = GlobSet((glob,))
    assert [p for p in yes if globs.match(p) != glob] == []
    assert [p for p in no if globs.match(p) is not None] == []


def test_a_one_operand_submodule_add_writes_the_directory_it_names(tree: Tree) -> None:
    # ``git submodule add ./.claude`` clones into ``.claude`` (git names the directory after
    # the repository): the agents' configuration, so denied as a write, not merely asked.
    assert tuple(tree.engine().check_line("git submodule add ./.claude")) == (
        "deny", "path.control",
        "'.claude' is protected at any depth ('**/.claude'): "
        "Claude Code's project settings, hooks, commands and agents",
        CONTROL_HINT,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("glob", "matches", "misses"),
    [("[!]a]", ["b", "x"], ["a", "]"]), ("[]a]", ["]", "a"], ["b"]), ("[!]]", ["b"], ["]"])],
)
def test_a_bracket_first_in_a_class_is_a_literal_as_in_fnmatch(
    glob: str, matches: list[str], misses: list[str]
) -> None:
    import fnmatch

    found = GlobSet((glob,))
    for name in matches + misses:
        assert (found.match(name) is not None) == fnmatch.fnmatchcase(name, glob), name
        assert (found.match(name) is not None) == (name in matches), name
