# ruff: noqa: E501  (tables: one command line, with what it must give, per row)
"""Mutation-testing survivors of the command judge (issue 14, tests/MUTATION.md), in-process.

``keel.policy._judge_cmds`` turns the facts of each simple command into verdicts. Each row
below is a line whose decision, rule, reason or suggestion (what the agent reads) a plausible
one-line slip in the judge would change: a recursive delete's reach, the script a command
runs, the patch file it applies, a path an earlier command creates, a shared branch, a glob.
"""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from keel.config import parse_config
from keel.policy import Policy

PATCH_CONTROL = "--- a/keel.toml\n+++ b/keel.toml\n@@ -1 +1 @@\n-a\n+b\n"
FILES = 300  # more than the 256 matches a glob is expanded to


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("cmds") / "ws"
    (ws / "src" / "d").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x = 1\n")
    (ws / ".env").write_text("SECRET=1\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/feat\n")  # a local branch
    (ws / "link").symlink_to("src")
    (ws / "mod").write_text("print(open('.env').read())\n")
    (ws / "chk.rb").write_text("puts File.read('.env')\n")
    (ws / "run.sh").write_text("cat '.env'\n")
    (ws / "k=ctl.diff").write_text(PATCH_CONTROL)
    (ws / "many").mkdir()
    for i in range(FILES):
        (ws / "many" / f"f{i:03}").write_text("")
        (ws / "dirs" / f"d{i:03}").mkdir(parents=True)
    return ws


CONFIG = '[policy]\npreset = "developer"\nunknown = "deny"\nunparseable = "ask"\n'
DEFAULT = "'{}' is not allowed by the developer preset or keel.toml"
ADD = "add a pattern to [policy] allow in keel.toml, or ask the user"
BROAD = (
    "deny",
    "risk.rm_recursive",
    "a recursive delete of the workspace, home or system",
    "delete the specific files or build directories you mean",
)
RM_ASK = ("ask", "default.ask", DEFAULT.format("rm"), ADD)
SHARED = "git rebase rewrites the history of {}, which is shared (the default branch, or pushed to a remote)"
CREATED = "'{}' goes through {} that an earlier command of this line creates (it may be a symlink)"
ONE_AT_A_TIME = "run the commands one at a time"
CONTROL = ("deny", "path.control", "'keel.toml' is protected at any depth ('**/keel.toml'): keel's policy: it decides what the agent may do",
           "keel's, git's, the agents' and the tools' configuration is changed by people, not agents")  # fmt: skip

Row = tuple[str, str, tuple[str, str, str, str | None]]
ROWS: list[Row] = [
    # a recursive delete of the directory it runs in (or above it) is broad, however spelt
    ("dev", "cd src && rm -rf .", BROAD),
    ("dev", "cd src && rm -rf ./", BROAD),
    ("dev", 'cd src && rm -rf ""', BROAD),
    ("dev", "cd src/d && rm -rf ..", BROAD),
    ("dev", "rm -rf ~*", BROAD),  # ~* is not a tilde prefix: rm -rf ~ and more
    ("dev", "rm -rf src/..*", BROAD),  # src/.. is the workspace
    ("dev", "cd src && rm -rf .X", RM_ASK),
    ("dev", "rm -rf src/..X", RM_ASK),
    # the script a command runs is read for the secrets it names; a module or a syntax check is not
    ("dev", "./run.sh", ("ask", "risk.secret_in_script", "./run.sh names the secret '.env', which it may print", "keep secrets out of what the model reads; ask the user")),
    ("dev", "python -m mod", ("ask", "default.ask", DEFAULT.format("python"), ADD)),
    ("dev", "ruby -c chk.rb", ("ask", "default.ask", DEFAULT.format("ruby"), ADD)),
    # --input= takes the whole rest of the word as the patch file
    ("dev", "patch -p1 --input=k=ctl.diff", CONTROL),
    # a variable that looks like a credential
    ("dev", "echo $API_TOKEN", ("deny", "risk.secret_read", "expands $API_TOKEN, which looks like a credential", "do not read credentials")),
    # a rebase of a local branch is fine; of main (the default branch) it is asked about
    ("dev", "git rebase --onto x main feat", ("ask", "default.ask", DEFAULT.format("git"), ADD)),
    ("dev", "git rebase main feat", ("ask", "default.ask", DEFAULT.format("git"), ADD)),
    ("dev", "git rebase --onto x feat main", ("ask", "risk.shared_history", SHARED.format("main"), "rebase a local feature branch, or ask a person")),
    # a path an earlier command of the line creates (it may be a symlink) is asked about
    ("dev", "mv src/a.py link && echo x > link/a.py", ("ask", "path.created_in_line", CREATED.format("link/a.py", "{root}/link"), ONE_AT_A_TIME)),
    ("dev", "env -C / git switch main; echo y > src/a.py", ("ask", "path.created_in_line", CREATED.format("src/a.py", "/"), ONE_AT_A_TIME)),
    ("cfg", 'ln -s a "$X" && echo x > src/a.py', ("deny", "path.created_in_line", CREATED.format("src/a.py", "a path"), ONE_AT_A_TIME)),
    ("dev", "cp a dX && echo x > d/a.py", ("allow", "preset.developer.allow", "matches 'cp' in the developer preset", None)),
    # contained, a write to a path known only at run time stays in the sandbox
    ("contained", '> "$X"', ("allow", "path.dynamic", "a redirect writes a file only known at run time; keel's sandbox keeps it inside the workspace, control files read-only", None)),
    ("strict", "echo x > src/b.py", ("deny", "preset.strict.no_writes", "the strict preset allows only read-only commands (echo writes 'src/b.py')", "use the edit tool, or ask the user")),
]  # fmt: skip


def _policy(mode: str, root: Path) -> Policy:
    if mode == "cfg":
        return Policy.from_config(parse_config(CONFIG), root)
    if mode == "contained":
        return Policy.for_preset("developer", root, contained=True)
    return Policy.for_preset(mode if mode == "strict" else "developer", root)


@pytest.mark.parametrize(("mode", "line", "expected"), ROWS)
def test_lines(
    mode: str, line: str, expected: tuple[str, str, str, str | None], root: Path
) -> None:
    got = _policy(mode, root).check_command(line.replace("{root}", str(root)))
    want = tuple(str(v).replace("{root}", str(root)) if v is not None else v for v in expected)
    assert (got.decision, got.rule, got.reason, got.suggestion) == want


def test_a_detached_head_rebases_no_branch(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    got = Policy.for_preset("developer", tmp_path).check_command("git rebase main")
    assert (got.decision, got.rule) == ("ask", "default.ask")


@pytest.mark.parametrize(
    ("target", "pattern"), [("many/f*", "many/f*"), ("dirs/d*/new", "dirs/d*")]
)
def test_a_glob_is_expanded_to_at_most_256_paths(target: str, pattern: str, root: Path) -> None:
    # The 257th path the glob finds (in the directory's order) is protected: it is not judged.
    found = list(glob.iglob(pattern, root_dir=root))
    assert len(found) == FILES
    last = found[256] + ("/new" if target.endswith("/new") else "")
    config = CONFIG + f'[[constraints]]\nid = "p"\ntext = "t"\nprotect = ["{last}"]\n'
    policy = Policy.from_config(parse_config(config), root)
    got = policy.check_command(f"touch {target}")
    assert (got.decision, got.rule) == ("allow", "preset.developer.allow")
    first = found[255] + ("/new" if target.endswith("/new") else "")
    config = CONFIG + f'[[constraints]]\nid = "p"\ntext = "t"\nprotect = ["{first}"]\n'
    got = Policy.from_config(parse_config(config), root).check_command(f"touch {target}")
    assert (got.decision, got.rule) == ("deny", "constraint.p")


# -- session-18 survivors -----------------------------------------------------------------------


def test_a_script_naming_a_secret_in_tmp_is_asked_about_when_contained(root: Path) -> None:
    # Contained, /tmp is private and writable, but a secret there is still read as a secret.
    script = root / "tmpsec.sh"
    script.write_text("cat '/tmp/k/.env'\n")
    got = Policy.for_preset("developer", root, contained=True).check_command("./tmpsec.sh")
    assert (got.decision, got.rule, got.reason) == (
        "ask",
        "risk.secret_in_script",
        "./tmpsec.sh names the secret '/tmp/k/.env', which it may print",
    )


def test_a_secret_looking_absolute_name_that_is_no_secret_passes_in_an_unknown_directory(
    root: Path,
) -> None:
    # `cd a b` fails: the directory is unknown, but an absolute name does not depend on it.
    script = root / "envdoc.sh"
    script.write_text(f"cat '{root}/environment.md'\n")
    config = CONFIG + f'allow = ["{script}"]\n'
    got = Policy.from_config(parse_config(config), root).check_command(f"cd a b; {script}")
    assert (got.decision, got.rule) == ("allow", "preset.developer.allow")


@pytest.mark.parametrize(
    ("line", "decision", "rule"),
    [
        # an argument after one keel cannot read is still looked at
        ("python3 x.py $Y /etc/passwd", "deny", "path.outside_workspace"),
        # an option's value is everything after its first '=' (a file may have '=' in its name)
        ("python3 x.py --in=/etc/x=y", "deny", "path.outside_workspace"),
        ("python3 x.py --in=.env=x", "ask", "default.ask"),  # '.env=x' is not '.env'
        ("python3 x.py --in=%2e%2e=x", "ask", "default.ask"),  # '..=x' is a name in the workspace
        # REV:PATH names a file for git's show-like commands only
        ("ls show HEAD:/etc/shadow", "allow", "preset.developer.allow"),
    ],
)
def test_the_files_any_command_names(root: Path, line: str, decision: str, rule: str) -> None:
    found = Policy.for_preset("developer", root).check_command(line)
    assert (found.decision, found.rule) == (decision, rule)
