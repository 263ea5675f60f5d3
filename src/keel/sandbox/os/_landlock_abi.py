"""The Landlock kernel interface: the ABI probe, access rights and rulesets (ctypes).

The mechanism only: the probe backend (``keel.sandbox.probe._landlock``) and ``keel exec``'s
(``keel.sandbox.exec._landlock``) decide what to grant; ``keel exec``'s Landlock path loads only
this and ``ctypes``, not the probe backend's process and Python-layout machinery.
"""

from __future__ import annotations

import ctypes
import os
import stat

from keel.sandbox.os import _quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
TRUNCATE = 1 << 14
IOCTL_DEV = 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_EXEC = EXECUTE | READ_FILE | READ_DIR
MARKER = "KEEL_SANDBOX_RUN"
CLEANUP_SECONDS = 2.0
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache",)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


_CACHE: dict[str, object] = {}


def _libc() -> ctypes.CDLL:
    if "libc" not in _CACHE:
        _CACHE["libc"] = ctypes.CDLL(None, use_errno=True)
    return _CACHE["libc"]  # pyright: ignore[reportReturnType]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled (cached)."""
    if "abi" not in _CACHE:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        abi = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
        _CACHE["abi"] = max(int(abi), 0)
    return _CACHE["abi"]  # pyright: ignore[reportReturnType]


def fs_mask(abi: int) -> int:
    """Every filesystem access right ``abi`` knows."""
    mask = (1 << 13) - 1
    if abi >= 2:
        mask |= 1 << 13  # REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


class Ruleset:
    """A Landlock ruleset built in the parent; the child only calls ``restrict_self``.

    Building it before ``fork`` keeps the forked child's work to three syscalls (the ruleset
    fd is close-on-exec, and ``subprocess`` closes other fds only after ``preexec_fn``).
    """

    def __init__(
        self, abi: int, rules: Sequence[tuple[str, int]], ports: Sequence[tuple[int, int]] = ()
    ) -> None:
        """Build the ruleset from ``(path, access)`` rules and ``(port, access)`` TCP rules.

        Port rules need ABI 4; every TCP bind and connect they do not allow is denied.
        """
        libc = _libc()
        fs = fs_mask(abi)
        attr = _RulesetAttr(fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        self.fd = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
        try:
            for path, access in rules:
                self._add(path, access & fs)
            for port, access in ports if abi >= 4 else ():
                rule = _NetPort(access, port)
                if libc.syscall(SYS_ADD_RULE, self.fd, RULE_NET_PORT, ctypes.byref(rule), 0):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule(port {port})")
        except OSError:
            self.close()
            raise

    def _add(self, path: str, access: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # optional trees such as /lib32 may be absent
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= FILE_RIGHTS
            rule = _PathBeneath(access, fd)
            if _libc().syscall(SYS_ADD_RULE, self.fd, RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                raise OSError(ctypes.get_errno(), f"landlock_add_rule({path!r})")
        finally:
            os.close(fd)

    def restrict(self) -> None:
        """Restrict the calling process (call in the child)."""
        libc = _libc()
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, self.fd, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")

    def close(self) -> None:
        """Close the ruleset fd (in the parent, after the child started)."""
        _quiet.close(self.fd)
