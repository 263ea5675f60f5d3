"""Seccomp BPF filters for sandboxed processes, built once per process with pyseccomp.

The filter is an allowlist-by-default with errno denials for the syscalls that widen the
attack surface (ptrace, mount, kexec, bpf, keyrings, io_uring, namespace creation), the
TIOCSTI/TIOCLINUX ioctls (terminal input injection, CVE-2017-5226, masked to 32 bits so the
``TIOCSTI | 1 << 32`` variant of CVE-2019-10063 is caught too) and sockets other than
AF_UNIX. Only the native architecture is allowed: a 32-bit ``int 0x80`` syscall hits the
"bad arch" action and kills the process, so the i386 tables cannot bypass the rules.

The ``landlock`` profile also denies ``socket()`` for AF_UNIX, because without a mount and
network namespace a named or abstract unix socket of the host would be reachable.

``keel exec`` has profiles of its own. ``exec`` (bwrap, own network namespace) allows
AF_UNIX, AF_INET and AF_INET6 sockets (the sandbox's loopback, the proxy bridge) and route
netlink, and refuses every other family. ``exec-landlock`` (no network namespace) allows only
TCP sockets (AF_INET/AF_INET6, SOCK_STREAM, protocol 0 or TCP), which Landlock then confines
to the proxy's port, and ``exec-landlock-nonet`` allows no socket at all. Their ``-root``
variants also refuse setting a setuid or setgid mode (``SETID_MODE_ARG``). Built filters are
cached in keel's per-user state directory (``cached_blob``), so ``keel exec`` does not import
pyseccomp on every run.
"""

from __future__ import annotations

import errno
import os

from keel.sandbox.os import _quiet

TYPE_CHECKING = False  # typing costs ~3 ms to import, and `keel exec` imports this module
if TYPE_CHECKING:
    from typing import Any, Literal

    Profile = Literal[
        "bwrap",
        "landlock",
        "exec",
        "exec-landlock",
        "exec-landlock-nonet",
        "exec-landlock-root",
        "exec-landlock-nonet-root",
    ]

PROFILES: tuple[Profile, ...] = (
    "bwrap",
    "landlock",
    "exec",
    "exec-landlock",
    "exec-landlock-nonet",
    "exec-landlock-root",
    "exec-landlock-nonet-root",
)
SETID_MODE_ARG = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2}
"""Which argument holds the mode: the ``-root`` Landlock profiles refuse a setuid or setgid
mode (Landlock does not govern file modes, and root owns the host's system binaries)."""
S_ISUID = 0o4000
S_ISGID = 0o2000

AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
AF_NETLINK = 16
SOCK_STREAM = 1
IPPROTO_TCP = 6
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
_NAMESPACE_FLAGS = (
    0x00000080,  # CLONE_NEWTIME
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
DENIED_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "syslog",
    "quotactl",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "vhangup",
    "uselib",
    "lookup_dcookie",
    "iopl",
    "ioperm",
)


_BUILT: dict[str, bytes] = {}


def seccomp_blob(profile: Profile = "bwrap") -> bytes:
    """The BPF program for ``profile``, built on first use and cached for the process.

    Raises:
        SandboxError: ``sandbox.seccomp`` when pyseccomp or libseccomp is missing or fails.
    """
    if profile not in _BUILT:
        _BUILT[profile] = _checked_build(profile)
    return _BUILT[profile]


def _checked_build(profile: Profile) -> bytes:
    from keel.core.errors import SandboxError
    from keel.core.installed import hint

    try:
        import pyseccomp  # noqa: F401  (imported here: it loads libseccomp at import)
    except (ImportError, RuntimeError, OSError) as exc:
        raise SandboxError(
            f"seccomp filters need pyseccomp and libseccomp: {exc} ({hint('sandbox')})",
            code="sandbox.seccomp",
        ) from exc
    try:
        return _build(profile)
    except (OSError, ValueError) as exc:
        raise SandboxError(
            f"cannot build the seccomp filter: {exc}", code="sandbox.seccomp"
        ) from exc


def _build(profile: Profile) -> bytes:
    import pyseccomp

    eperm = pyseccomp.ERRNO(errno.EPERM)
    filt = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    filt.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    for name in DENIED_SYSCALLS:
        if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) >= 0:
            filt.add_rule(eperm, name)
    for request in (TIOCSTI, TIOCLINUX):
        filt.add_rule(eperm, "ioctl", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, request))
    for flag in _NAMESPACE_FLAGS:
        filt.add_rule(eperm, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    # glibc falls back to clone() on ENOSYS; clone3 takes its flags in memory seccomp cannot see.
    filt.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    _socket_rules(filt, profile.removesuffix("-root"), eperm)
    if profile.endswith("-root"):
        for name, index in SETID_MODE_ARG.items():
            if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) < 0:
                continue
            for bit in (S_ISUID, S_ISGID):
                filt.add_rule(eperm, name, pyseccomp.Arg(index, pyseccomp.MASKED_EQ, bit, bit))
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(write_fd, "wb", closefd=True) as sink:
            filt.export_bpf(sink)
        chunks: list[bytes] = []
        while chunk := os.read(read_fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(read_fd)
    return b"".join(chunks)


def _socket_rules(filt: Any, profile: str, eperm: Any) -> None:
    """Which ``socket()`` calls each profile refuses (the filter allows by default)."""
    import pyseccomp

    arg = pyseccomp.Arg
    if profile == "bwrap":
        filt.add_rule(eperm, "socket", arg(0, pyseccomp.NE, AF_UNIX))
    elif profile == "exec":
        allowed = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK}
        for family in range(AF_NETLINK + 1):
            if family not in allowed:
                filt.add_rule(eperm, "socket", arg(0, pyseccomp.EQ, family))
        filt.add_rule(eperm, "socket", arg(0, pyseccomp.GT, AF_NETLINK))
        # Route netlink only (interface listings); audit, uevent and the rest stay closed.
        filt.add_rule(eperm, "socket", arg(0, pyseccomp.EQ, AF_NETLINK), arg(2, pyseccomp.NE, 0))
    elif profile == "exec-landlock":
        for family in range(AF_INET6 + 1):
            if family not in (AF_INET, AF_INET6):
                filt.add_rule(eperm, "socket", arg(0, pyseccomp.EQ, family))
        filt.add_rule(eperm, "socket", arg(0, pyseccomp.GT, AF_INET6))
        # TCP only: Landlock's network rules know TCP, nothing else (UDP, SCTP, raw).
        for kind in range(16):
            if kind != SOCK_STREAM:
                filt.add_rule(eperm, "socket", arg(1, pyseccomp.MASKED_EQ, 0xF, kind))
        filt.add_rule(eperm, "socket", arg(2, pyseccomp.GT, IPPROTO_TCP))
        for protocol in range(1, IPPROTO_TCP):
            filt.add_rule(eperm, "socket", arg(2, pyseccomp.EQ, protocol))
    else:  # landlock, exec-landlock-nonet: no socket at all
        filt.add_rule(eperm, "socket")


def cached_blob(profile: Profile, state_dir: str) -> bytes:
    """The filter for ``profile``, read from ``state_dir`` or built and stored there.

    The file name carries keel's version and this module's size and mtime, so an upgrade or an
    edit of the rules builds a fresh filter. The state directory is private to the user (0700)
    and never visible inside a sandbox.
    """
    path = os.path.join(state_dir, "cache", f"seccomp-{profile}-{_cache_key()}.bpf")
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
        if blob and len(blob) % 8 == 0:
            return blob
    except OSError:
        pass
    blob = seccomp_blob(profile)
    _store(path, blob)
    return blob


def _cache_key() -> str:
    from keel import __version__

    st = os.stat(__file__)
    return f"{__version__}-{os.uname().machine}-{st.st_size}-{st.st_mtime_ns}"


def _store(path: str, blob: bytes) -> None:
    """Best effort: an unwritable state directory only costs speed."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except OSError:
        _quiet.unlink(tmp)


def blob_fd(profile: Profile = "bwrap") -> int:
    """A new memfd with the filter at offset 0, for ``bwrap --seccomp FD``; the caller closes it."""
    fd = os.memfd_create("keel-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, seccomp_blob(profile))
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class PreparedFilter:
    """A filter held in memory so a forked child can install it with two ``prctl`` calls."""

    def __init__(self, blob: bytes) -> None:
        import ctypes

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self._buffer = ctypes.create_string_buffer(blob, len(blob))
        self._prog = SockFprog(len(blob) // 8, ctypes.addressof(self._buffer))
        self._libc = ctypes.CDLL(None, use_errno=True)

    def install(self) -> None:
        """Set no_new_privs and load the filter into the calling thread (call in the child)."""
        import ctypes

        prctl = self._libc.prctl
        if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
