"""The shadow git repository: keel's own GIT_DIR over the user's work tree.

Every git process keel starts here runs with an environment built from scratch by
``keel.core.gitsafe``: the shadow ``GIT_DIR`` (``.keel/checkpoints``), the workspace as
``GIT_WORK_TREE``, a private index, no system or global config, ``gitsafe.SAFE_CONFIG`` (hooks,
fsmonitor, transports off) above any config file, and a fixed identity. Nothing the user or the
agent has configured (their ``.git``, their ``~/.gitconfig``, a ``GIT_DIR`` leaking in from a
hook environment, a ``.gitattributes`` filter or ``text`` conversion, a nested repository, a
``git`` planted on ``PATH``) can change what keel does, and nothing keel does reaches the user's
refs, index, stash or hooks. The shadow repository lives in the workspace too, so keel
refuses it when it points elsewhere (``commondir``, ``objects/info/alternates``, a symlink:
``workspace.git_indirect``) and keeps its ``info/attributes`` neutral on every use.

While keel holds the checkpoint store's flock (``lock_fd``, see ``_lock``) every git process
inherits it, so the flock outlives a killed keel until its git processes are gone too. Without
it, git runs with ``GIT_OPTIONAL_LOCKS=0``: a read never takes a lock another keel process
could mistake for a stale one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path

from keel.core import gitsafe
from keel.core.errors import WorkspaceError
from keel.core.files import write_atomic
from keel.core.root import STATE_DIR

HEAD_REF = "refs/keel/head"
"""The newest checkpoint: the shadow HEAD (a symbolic ref to it), never packed."""

IDENTITY = {
    "GIT_AUTHOR_NAME": "keel",
    "GIT_AUTHOR_EMAIL": "keel@localhost",
    "GIT_COMMITTER_NAME": "keel",
    "GIT_COMMITTER_EMAIL": "keel@localhost",
}

# Settings written into the shadow repository's own config once, at creation.
SHADOW_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.bare", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.fsmonitor", "false"),
    ("core.symlinks", "true"),
    ("core.quotepath", "false"),
    ("core.untrackedCache", "true"),
    ("core.preloadIndex", "true"),
    ("gc.auto", "0"),
    ("commit.gpgSign", "false"),
    ("advice.addEmbeddedRepo", "false"),
    ("advice.addIgnoredFile", "false"),
    ("diff.renames", "false"),
)

_REPO_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")

EXCLUDES = (
    "# written by keel: never snapshot keel's own state or its in-flight files\n"
    f"/{STATE_DIR}/\n.keel-txn-*/\n.*.keel-tmp-*\n.*.keel-bak-*\n"
)


def git_executable(root: Path) -> str:
    """The git binary (never one inside ``root``), or a ``WorkspaceError`` saying it is missing."""
    found = gitsafe.git_executable(str(root))
    if found is None:
        raise WorkspaceError(
            "git is not installed (on PATH, outside the workspace); checkpoints need git",
            code="workspace.no_git",
        )
    return found


class ShadowGit:
    """Runs git against the shadow repository with an isolated environment."""

    def __init__(self, root: Path, git_dir: Path) -> None:
        self.root = root
        self.git_dir = git_dir
        self.index = git_dir / "keel-index"
        self._git = git_executable(root)
        self._env = self._environment()
        self._env_unlocked = {**self._env, "GIT_OPTIONAL_LOCKS": "0"}
        self.lock_fd: int | None = None
        """The checkpoint store's flock while keel holds it; git processes inherit it."""

    def _environment(self) -> dict[str, str]:
        env = gitsafe.environment(
            git_dir=str(self.git_dir),
            work_tree=str(self.root),
            index=str(self.index),
            # files over the size cap, listed by keel (a path, so set per process); pair 0,
            # so GIT_CONFIG_VALUE_0 replaces it where keel's list must not apply
            config=(("core.excludesFile", str(self.git_dir / "keel-large")),),
        )
        env.update(IDENTITY)
        env["GIT_LITERAL_PATHSPECS"] = "1"
        return env

    def ensure(self) -> None:
        """Create the shadow repository if it does not exist yet (safe against a racing keel).

        Runs without the flock (``keel.lock`` lives in the repository it creates): git builds
        the repository in a private directory that is renamed into place when complete, so
        no git lock is ever taken in the shadow repository itself.
        """
        if (self.git_dir / "HEAD").is_file():
            self._guard()
            _neutral_attributes(self.git_dir)  # repositories made before it was written
            return
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        _ignore_state_dir(self.git_dir.parent)
        temp = Path(tempfile.mkdtemp(prefix=f"{self.git_dir.name}.new-", dir=self.git_dir.parent))
        bare = {k: v for k, v in self._env.items() if k not in _REPO_VARS}
        try:
            self._init(temp, bare)
            os.rename(temp, self.git_dir)
        except (OSError, WorkspaceError):
            shutil.rmtree(temp, ignore_errors=True)
            if not (self.git_dir / "HEAD").is_file():
                raise WorkspaceError(
                    f"could not create the checkpoint repository at {self.git_dir}",
                    code="workspace.init",
                ) from None

    def _init(self, path: Path, env: dict[str, str]) -> None:
        self._check(("init", "-q", "--bare", "--template=", str(path)), env)
        for key, value in SHADOW_CONFIG:
            self._check(("--git-dir", str(path), "config", key, value), env)
        self._check(("--git-dir", str(path), "symbolic-ref", "HEAD", HEAD_REF), env)
        info = path / "info"
        info.mkdir(exist_ok=True)
        (info / "exclude").write_text(EXCLUDES, encoding="utf-8")
        _neutral_attributes(path)

    def _guard(self) -> None:
        """Refuse a shadow repository that sends git elsewhere (``workspace.git_indirect``).

        ``.keel/`` is protected from the agent; this is the check that does not depend on it.
        """
        gitsafe.refuse_indirection(str(self.git_dir.parent))
        gitsafe.refuse_indirection(str(self.git_dir))

    def _check(self, args: Sequence[str], env: dict[str, str]) -> None:
        proc = subprocess.run(
            [self._git, *args], env=env, capture_output=True, check=False, cwd=self.root
        )
        if proc.returncode != 0:
            raise WorkspaceError(
                f"git {args[0]} failed: {git_detail(proc.stderr)}", code="workspace.init"
            )

    def write_commit(self, tree: str, parent: str | None, message: str, ts: int) -> str:
        """Store a commit object directly (a loose object), saving a git process per checkpoint."""
        who = f"{IDENTITY['GIT_AUTHOR_NAME']} <{IDENTITY['GIT_AUTHOR_EMAIL']}> {ts} +0000"
        lines = [f"tree {tree}"]
        if parent:
            lines.append(f"parent {parent}")
        lines += [f"author {who}", f"committer {who}", "", message]
        body = "\n".join(lines).encode("utf-8")
        data = b"commit %d\0" % len(body) + body
        sha = hashlib.sha1(data, usedforsecurity=False).hexdigest()
        target = self.git_dir / "objects" / sha[:2] / sha[2:]
        if not os.path.exists(target):
            if not os.path.isdir(target.parent):
                target.parent.mkdir(exist_ok=True)
            write_atomic(target, zlib.compress(data, 1), prefix="keel-obj")
        return sha

    def read_ref(self, ref: str) -> str | None:
        """The commit a loose ref points at, or ``None``."""
        try:
            sha = (self.git_dir / ref).read_text(encoding="ascii").strip()
        except OSError:
            return None
        return sha if len(sha) == 40 else None

    def commit_tree(self, commit: str) -> str:
        """The tree of a commit: from its loose object when there is one, else from git."""
        try:
            raw = zlib.decompress((self.git_dir / "objects" / commit[:2] / commit[2:]).read_bytes())
            body = raw[raw.index(b"\0") + 1 :]
            if body.startswith(b"tree "):
                return body[5:45].decode("ascii")
        except (OSError, ValueError, zlib.error):
            pass
        return self.run("rev-parse", f"{commit}^{{tree}}").decode().strip()

    def set_ref(self, ref: str, sha: str) -> None:
        """Point a loose ref at ``sha`` (atomic rename; keel never packs its refs)."""
        path = self.git_dir / ref
        if not os.path.isdir(path.parent):
            path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, sha + "\n", prefix="keel-ref")

    def import_files(self, paths: Sequence[bytes]) -> None:
        """Load the index with ``paths`` through ``git fast-import`` (a single pack).

        ``git add`` writes one loose object file per file; on the first snapshot of a large
        work tree that dominates, so the files are streamed into one pack instead, read into
        the index, and the index's stat data refreshed (hashing again, writing nothing).
        """
        ref = "refs/keel/import"
        self._guard()
        proc = subprocess.Popen(  # --force: a ref left by a killed keel must not block this
            [self._git, "fast-import", "--quiet", "--done", "--force"],
            cwd=self.root,
            env=self._current_env(),
            pass_fds=self._pass_fds(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None
        try:
            proc.stdin.write(
                f"commit {ref}\ncommitter keel <keel@localhost> 0 +0000\ndata 0\n".encode()
            )
            for raw in paths:
                entry = self._fast_import_entry(raw)
                if entry is not None:
                    proc.stdin.write(entry)
            proc.stdin.write(b"\ndone\n")
            proc.stdin.flush()
        except OSError:
            pass  # the exit status below says what went wrong
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise WorkspaceError(f"git fast-import failed: {git_detail(err)}", code="workspace.git")
        self.run("read-tree", ref)
        self.run("update-ref", "-d", ref)
        self.run("update-index", "-q", "--refresh", check=False)

    def _fast_import_entry(self, raw: bytes) -> bytes | None:
        path = self.root / os.fsdecode(raw)
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                mode, data = b"120000", os.fsencode(os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                mode = b"100755" if st.st_mode & 0o100 else b"100644"
                data = path.read_bytes()
            else:
                return None
        except OSError:
            return None  # gone since git listed it: the next snapshot sees that
        return b"M %s inline %s\ndata %d\n%s\n" % (mode, _quote(raw), len(data), data)

    def run(
        self,
        *args: str,
        stdin: bytes | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
    ) -> bytes:
        """Run ``git ARGS`` in the workspace; stdout as bytes; failures raise ``WorkspaceError``."""
        proc = self.proc(args, stdin=stdin, env=env)
        if check and proc.returncode != 0:
            raise WorkspaceError(
                f"git {args[0]} failed in the checkpoint repository: {git_detail(proc.stderr)}",
                code="workspace.git",
                command=list(args),
            )
        return proc.stdout

    def proc(
        self,
        args: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git ARGS`` and return the completed process, whatever its exit code.

        ``timeout``: seconds before git is killed and ``subprocess.TimeoutExpired`` raised.
        """
        base = self._current_env()
        self._guard()
        try:
            return subprocess.run(
                [self._git, *args],
                cwd=self.root,
                env={**base, **env} if env else base,
                input=stdin,
                capture_output=True,
                check=False,
                pass_fds=self._pass_fds(),
                timeout=timeout,
            )
        except OSError as exc:
            raise WorkspaceError(f"could not run git: {exc}", code="workspace.git") from exc

    def _current_env(self) -> dict[str, str]:
        return self._env if self.lock_fd is not None else self._env_unlocked

    def _pass_fds(self) -> tuple[int, ...]:
        return () if self.lock_fd is None else (self.lock_fd,)


def git_detail(stderr: bytes) -> str:
    """What git said on stderr, for a keel message: its ``fatal:``/``error:`` labels dropped.

    keel's error carries the code and says what failed; git's labels would read as a second,
    raw error inside it.
    """
    kept: list[str] = []
    for line in stderr.decode("utf-8", "replace").splitlines():
        label, colon, rest = line.partition(":")
        text = rest if colon and label.strip().lower() in _GIT_LABELS else line
        if text.strip():
            kept.append(text.strip())
    return "; ".join(kept) or "no message"


_GIT_LABELS = frozenset({"fatal", "error", "warning"})


def _neutral_attributes(git_dir: Path) -> None:
    """Keep ``info/attributes`` neutral: it beats every ``.gitattributes`` of the work tree.

    Without it a ``text``/``eol`` attribute makes a checkpoint store other bytes than the file
    holds (a rollback would rewrite line endings), and ``filter``/``diff`` name drivers.
    """
    path = git_dir / "info" / "attributes"
    try:
        if path.read_text(encoding="utf-8") == gitsafe.NEUTRAL_ATTRIBUTES:
            return
    except (OSError, UnicodeDecodeError):
        pass
    path.parent.mkdir(exist_ok=True)
    write_atomic(path, gitsafe.NEUTRAL_ATTRIBUTES, prefix="keel-attr")


def _ignore_state_dir(state: Path) -> None:
    """Keep ``.keel/`` out of the user's ``git status`` without touching their git."""
    marker = state / ".gitignore"
    if not marker.exists():
        marker.write_text("# written by keel: its state is not part of your project\n*\n")


def _quote(path: bytes) -> bytes:
    """A path as fast-import reads it: C-style quoted when it must be."""
    if b"\n" not in path and not path.startswith(b'"'):
        return path
    escaped = path.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
    return b'"' + escaped + b'"'
