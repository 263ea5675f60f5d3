"""Seccomp BPF filters for sandboxed processes, built once per process with pyseccomp.

The filter is an allowlist-by-default with errno denials for the syscalls that widen the
attack surface (ptrace, mount, kexec, bpf, keyrings, io_uring, namespace creation), the
TIOCSTI/TIOCLINUX ioctls (terminal input injection, CVE-2017-5226, masked to 32 bits so the
``TIOCSTI | 1 << 32`` variant of CVE-2019-10063 is caught too) and sockets other than
AF_UNIX. Only the native architecture is allowed: a 32-bit ``int 0x80`` syscall hits the
"bad arch" action and kills the process, so the i386 tables cannot bypass the rules.

The ``landlock`` profile also denies ``socket()`` for AF_UNIX, because without a mount and
network namespace a named or abstract unix socket of the host would be reachable.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from typing import Literal

from keel.errors import SandboxError

Profile = Literal["bwrap", "landlock"]

AF_UNIX = 1
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
)


@functools.cache
def seccomp_blob(profile: Profile = "bwrap") -> bytes:
    """The BPF program for ``profile``, built on first use and cached for the process.

    Raises:
        SandboxError: ``sandbox.seccomp`` when pyseccomp or libseccomp is missing or fails.
    """
    try:
        import pyseccomp  # noqa: F401  (imported here: it loads libseccomp at import)
    except (ImportError, RuntimeError, OSError) as exc:
        raise SandboxError(
            f"seccomp filters need pyseccomp and libseccomp: {exc} (install keel[sandbox])",
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
    if profile == "landlock":
        filt.add_rule(eperm, "socket")
    else:
        filt.add_rule(eperm, "socket", pyseccomp.Arg(0, pyseccomp.NE, AF_UNIX))
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


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class PreparedFilter:
    """A filter held in memory so a forked child can install it with two ``prctl`` calls."""

    def __init__(self, blob: bytes) -> None:
        self._buffer = ctypes.create_string_buffer(blob, len(blob))
        self._prog = _SockFprog(len(blob) // 8, ctypes.addressof(self._buffer))
        self._libc = ctypes.CDLL(None, use_errno=True)

    def install(self) -> None:
        """Set no_new_privs and load the filter into the calling thread (call in the child)."""
        prctl = self._libc.prctl
        if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
