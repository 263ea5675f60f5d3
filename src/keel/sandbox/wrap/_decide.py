"""``keel wrap``'s decision service: the hooks of a wrapped client are decided outside its sandbox.

Inside ``keel wrap`` the client runs its hooks (``keel hook ...``) in the sandbox, where the
workspace's ``.keel/`` (journal, session state, checkpoints, the stop flag) is not visible.
Instead ``.keel/`` there holds only ``hookd.sock`` and ``hookd.pid``: the hook's ordinary relay
(``keel.hook.relay.relay``) reaches the sandbox side of ``keel wrap`` (``_wrap_bridge``), which
pipes the request to ``decide.sock``, a socket of this service on the host. Nothing inside can
read or change the journal, and a hook that cannot reach the service decides in process,
where opening the journal fails: the call is blocked (fail closed).

``Decider`` (in the ``keel wrap`` process) listens on ``decide.sock`` and, when the first
request arrives, starts ``main`` in a new host process with the listener and that connection
(isolated from the workspace: ``keel.core.isolated``, in ``.keel/``); if that process exits (a keel
source file changed, a crash), the next request starts another. Runs without hooks therefore
start nothing. ``main`` answers with ``keel hookd``'s own request handling
(``keel.hook.server``), with two differences:

- every request's ``KEEL_*`` variables, ``HOME`` and ``XDG_STATE_HOME`` are the host's, not
  the sandbox's: a process inside cannot point keel at another state directory (journal key);
- the guard is told the client is contained already: an allowed shell command is not rewritten
  to ``keel exec`` (which cannot nest inside the sandbox), a command that runs as written is
  not a bypass, and ``[sandbox] contain = "always"`` is satisfied. The policy keeps judging as
  for contained commands.

Anything inside the sandbox can connect, as the hook does: it can ask for decisions and so add
calls to the journal, as an uncontained agent could by running ``keel hook`` itself. It cannot
read the journal, answer for keel, or change what was recorded.
"""

from __future__ import annotations

import os
import sys

from keel.core.root import STATE_DIR
from keel.hook.wire import ACK
from keel.sandbox.os import _quiet

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping

PINNED_PREFIX = "KEEL_"
PINNED_NAMES = ("HOME", "XDG_STATE_HOME")
ACCEPT_POLL = 1.0


class Decider:
    """The host side of ``decide.sock``: starts the decision process on demand (see the module)."""

    def __init__(self, root: str, path: str, log_path: str) -> None:
        """Listen on ``path`` for the hooks of the workspace at ``root``."""
        import _socket
        import _thread

        self.root = root
        self.log_path = log_path
        self.closed = False
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = _thread.allocate_lock()
        self.listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.listener.bind(path)
        finally:
            os.umask(old)
        self.listener.listen(64)
        _thread.start_new_thread(self._serve, ())

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener._accept()  # pyright: ignore[reportAttributeAccessIssue]
            except OSError:
                return
            try:
                # the hook's sign of life at once, as hookd sends it: the decision process
                # takes a moment to start, and a relay that hears nothing takes us for hung
                _quiet.call(os.write, conn, ACK)
                self._hand_over(conn)
            finally:
                os.close(conn)
            process = self.process
            if process is not None:
                process.wait()

    def _hand_over(self, conn: int) -> None:
        """Start the decision process with the listener and its first connection."""
        import subprocess

        from keel.core.isolated import launcher_argv

        listen_fd = self.listener.fileno()
        fds = (str(listen_fd), str(conn))
        # isolated, a script by path, in .keel/: what the sandboxed agent wrote in the
        # workspace must not reach this host process's imports
        argv = launcher_argv("wrap-decide", *fds, self.root, str(os.getpid()))
        with self._lock:
            if self.closed:
                return
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            log = os.open(self.log_path, flags, 0o600)
            try:
                self.process = subprocess.Popen(
                    argv,
                    pass_fds=(listen_fd, conn),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    cwd=os.path.join(self.root, STATE_DIR),
                    start_new_session=True,
                )
            except OSError:
                self.process = None
            finally:
                os.close(log)

    def close(self) -> None:
        """Stop listening and end the decision process (the sandbox is gone by now)."""
        import _socket

        with self._lock:
            self.closed = True
            process = self.process
        _quiet.call(self.listener.shutdown, _socket.SHUT_RDWR)
        self.listener.close()
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except Exception:  # it would not end: it must not outlive keel wrap
                process.kill()
                process.wait()


def main(argv: list[str] | None = None) -> int:
    """The decision process: ``LISTEN_FD CONN_FD ROOT PARENT_PID`` (see the module)."""
    import functools
    import socket
    import threading
    from pathlib import Path

    from keel.hook.server import Service

    args = sys.argv[1:] if argv is None else argv
    listen_fd, conn_fd, root, parent = int(args[0]), int(args[1]), args[2], int(args[3])
    service = Service(Path(root), inside_sandbox=True)
    pinned = functools.partial(pin_environment, host=dict(os.environ))
    listener = socket.socket(fileno=listen_fd)
    listener.settimeout(ACCEPT_POLL)
    first = socket.socket(fileno=conn_fd)
    threading.Thread(  # the Decider sent its ACK
        target=service.serve, args=(first, pinned), kwargs={"acked": True}, daemon=True
    ).start()
    while not service.stopped and os.getppid() == parent:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        except OSError:
            break
        threading.Thread(target=service.serve, args=(conn, pinned), daemon=True).start()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and thread.daemon:
            thread.join(30)
    service.close()
    return 0


def pin_environment(fields: list[bytes], host: Mapping[str, str]) -> list[bytes]:
    """The relay request ``fields`` with keel's state variables taken from ``host``.

    A request that does not parse is returned as it is (the handler refuses it).
    """
    from keel.hook.wire import parse_request, request_fields

    request = parse_request(fields)
    if request is None:
        return fields
    env = {
        k: v
        for k, v in request.env.items()
        if not k.startswith(PINNED_PREFIX) and k not in PINNED_NAMES
    }
    env.update({k: v for k, v in host.items() if k.startswith(PINNED_PREFIX) or k in PINNED_NAMES})
    return request_fields(request.replace(env=env))
