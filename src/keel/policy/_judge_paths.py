"""Path rules: reading and changing files, judged in every form an attacker could mean.

Writes are refused (``path.control``), at any depth, to the ``deny`` entries of the protected-path
table (``keel.core.protected``: keel's and the agents' control files, git internals and nested
repositories, files that run on ``cd``, ``git status`` or opening the folder, CI and pre-commit
configuration unless ``[sandbox] protect_ci`` is off) and to ``[sandbox] read_only`` (a path
below a matching directory included); a write to a prompt file of future agent sessions (the
table's ``ask`` entries: ``CLAUDE.md``, ``AGENTS.md``...) is asked about (``path.prompt_file``).
The table is matched case-insensitively, on the lexical and the symlink-resolved path, after
``..``, ``~`` and encodings are resolved: the same table ``keel exec`` enforces.

A shell command of a contained policy (it runs in ``keel exec``) may read outside the workspace
unless it reads a secret: the sandbox shows only a few system files and a HOME without secrets,
read-only. The file tools (Read, Write, Edit) run in the client, never in the sandbox: their
paths are judged as uncontained, whatever the mode.
"""

from __future__ import annotations

import os

from keel.core.protected import OWN_REASON, entry_for, match
from keel.policy._judge_net import NetRules
from keel.policy._paths import (
    DEVICES_READ,
    DEVICES_WRITE,
    GlobSet,
    absolute_forms,
    expand_home,
    inside,
    is_foreign_absolute,
    relative,
    variants,
)
from keel.policy._ruling import NO_VERDICT, Ruling, allow, deny, worst

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from keel.policy._match import Loose

    Constraint = tuple[str, str, GlobSet, tuple[Loose, ...]]

PATH_MAX = 4096  # longer paths cannot be opened on Linux; judging them is only a cost


class PathRules(NetRules):
    """``check_path`` and ``in_scope``."""

    root: str
    root_real: str
    home: str
    protected: GlobSet
    own: GlobSet
    protect_ci: bool
    read_only: GlobSet
    read_outside: GlobSet
    secrets: GlobSet
    secret_ok: GlobSet
    include: GlobSet
    exclude: GlobSet
    constraints: tuple[Constraint, ...]
    file_writes: bool

    def _cwd(self, cwd: str | None) -> str:
        if not cwd:
            return self.root
        full = os.path.normpath(os.path.join(self.root, cwd))
        return full if inside(full, self.root) else self.root

    def check_path(
        self,
        raw: str,
        op: str,
        cwd: str | None = None,
        *,
        resolved_cwd: bool = False,
        sandboxed: bool = False,
    ) -> Ruling:
        """Judge reading (``read``), listing (``stat``) or changing (``write``/``edit``) ``raw``.

        ``stat`` is a read that shows no content (``ls``, ``wc``, ``sha256sum``): a secret
        may be named by it. ``sandboxed``: a shell command inside ``keel exec`` does it (a
        file tool never is), so a read outside the workspace that is not a secret is allowed.
        """
        bad = self.bad_input(raw, "path")
        if bad is not None:
            return bad
        if not raw.strip():
            return deny("path.empty", "the path is empty", "name a file in the workspace")
        if len(raw) > PATH_MAX:
            return deny("path.too_long", f"the path is over {PATH_MAX} characters")
        base = cwd if resolved_cwd else self._cwd(cwd)
        forms = variants(raw)
        if any("\x00" in f for f in forms):
            return deny("path.nul", f"{raw!r} decodes to a NUL byte")
        if any(c < " " or c == "\x7f" for f in forms for c in f):
            return deny(
                "path.control_char",
                f"{raw!r} contains or decodes to a control character",
                "name files without control characters",
            )
        verdicts = [self._judge_form(f, raw, op, base, sandboxed) for f in forms]
        return worst(verdicts) or NO_VERDICT

    def _secret(self, path: str) -> bool:
        key = path.lstrip("/")
        return self.secrets.match(key) is not None and self.secret_ok.match(key) is None

    def _judge_form(
        self, form: str, raw: str, op: str, cwd: str | None, sandboxed: bool = False
    ) -> Ruling:
        path = expand_home(form, self.home)
        if is_foreign_absolute(path):
            return deny(
                "path.outside_workspace",
                f"{raw!r} is a Windows drive or network path",
                "use a path inside the workspace",
            )
        if cwd is None and not path.startswith("/"):
            return self.level(
                "unparseable",
                "path.dynamic",
                f"{raw!r} is relative to a directory only known at run time",
                "use a path relative to the workspace root",
            )
        lexical, real = absolute_forms(path, cwd or self.root)
        if lexical.startswith(("/dev/tcp/", "/dev/udp/")):
            return self.check_dev_tcp(lexical, raw)
        devices = DEVICES_READ if op in ("read", "stat") else DEVICES_WRITE
        if lexical in devices or path in devices:
            return allow("path.device", f"{lexical} is a standard device")
        if op == "read" and (self._secret(lexical) or self._secret(real)):
            return deny(
                "risk.secret_read",
                f"{raw!r} is a secret ({real})",
                "do not read credentials; ask the user for what you need",
            )
        if not (inside(lexical, self.root) and inside(real, self.root_real)):
            shown = real if lexical == real else f"{lexical} -> {real}"
            return self._outside(raw, shown, op, lexical, real, sandboxed)
        if op in ("read", "stat"):
            return allow("path.read", f"{raw!r} is inside the workspace")
        return self._judge_write(
            raw, {relative(lexical, self.root), relative(real, self.root_real)}
        )

    def _outside(
        self, raw: str, shown: str, op: str, lexical: str, real: str, sandboxed: bool
    ) -> Ruling:
        if op not in ("read", "stat"):
            if sandboxed and inside(lexical, "/tmp") and inside(real, "/tmp"):
                return allow(
                    "path.tmp_contained",
                    f"{raw!r} is in /tmp, which is private to each contained command",
                )
            return deny(
                "path.outside_workspace",
                f"{raw!r} resolves outside the workspace ({shown})",
                "write only inside the workspace",
            )
        if self.read_outside.match(lexical.lstrip("/")) and self.read_outside.match(
            real.lstrip("/")
        ):
            return allow("path.read_outside", f"{shown} matches [policy] read_outside")
        if sandboxed and not (self._secret(lexical) or self._secret(real)):
            return allow(
                "path.read_contained",
                f"{shown} is outside the workspace; keel's sandbox shows it read-only, if at all",
            )
        return deny(
            "path.outside_workspace",
            f"{raw!r} resolves outside the workspace ({shown})",
            "read files inside the workspace, or add a glob to [policy] read_outside",
        )

    def control_glob(self, rel: str) -> str | None:
        """The control-set glob ``rel`` (workspace-relative) falls under, if any."""
        found = match(rel, self.protect_ci)
        if found is not None and found[0].verdict == "deny":
            return found[1]
        glob = self.own.match(rel)
        if glob is not None:
            return glob
        parts = rel.split("/")
        for end in range(len(parts), 0, -1):
            glob = self.read_only.match("/".join(parts[:end]))
            if glob is not None:
                return glob
        return None

    def _why(self, rel: str) -> str:
        """Why ``rel`` is protected: the table's reason, keel's installation or read_only."""
        entry = entry_for(rel, self.protect_ci)
        if entry is not None:
            return entry.reason
        return OWN_REASON if self.own.match(rel) else "[sandbox] read_only in keel.toml"

    def _judge_write(self, raw: str, rels: set[str]) -> Ruling:
        for rel in sorted(rels):
            glob = self.control_glob(rel)
            if glob is not None:
                return deny(
                    "path.control",
                    f"{rel!r} is protected at any depth ({glob!r}): {self._why(rel)}",
                    "keel's, git's, the agents' and the tools' configuration is changed by "
                    "people, not agents",
                )
            for cid, text, protect, _ in self.constraints:
                if protect.match(rel):
                    return deny(
                        f"constraint.{cid}",
                        f"{rel!r} is protected by constraint {cid}: {text}",
                        "leave this file alone; the constraint is in keel.toml",
                    )
            glob = self.protected.match(rel)
            if glob is not None:
                return deny(
                    "path.protected",
                    f"{rel!r} is protected ({glob!r})",
                    "protected files are changed by people, not agents",
                )
            if self.include.match(rel) is None or self.exclude.match(rel) is not None:
                return deny(
                    "path.out_of_scope",
                    f"{rel!r} is outside the task's [scope]",
                    "change only files in scope, or widen [scope] in keel.toml",
                )
        if not self.file_writes:
            return deny(
                f"preset.{self.preset}.no_writes", f"the {self.preset} preset allows no writes"
            )
        for rel in sorted(rels):
            found = match(rel, self.protect_ci)
            if found is not None and found[0].verdict == "ask":
                return Ruling(
                    "ask",
                    "path.prompt_file",
                    f"{rel!r} is a prompt file ({found[1]!r}): {found[0].reason}",
                    "a person reviews changes to the instructions of future agent sessions",
                )
        return allow("path.in_scope", f"{raw!r} is inside the workspace and in scope")

    def in_scope(self, raw: str) -> bool:
        """True if ``raw`` is inside the workspace and matched by ``[scope]``."""
        if self.bad_input(raw, "path") is not None or not raw.strip():
            return False
        for form in variants(raw):
            path = expand_home(form, self.home)
            if is_foreign_absolute(path):
                return False
            lexical, real = absolute_forms(path, self.root)
            if not (inside(lexical, self.root) and inside(real, self.root_real)):
                return False
            for rel in (relative(lexical, self.root), relative(real, self.root_real)):
                if self.include.match(rel) is None or self.exclude.match(rel) is not None:
                    return False
        return True
