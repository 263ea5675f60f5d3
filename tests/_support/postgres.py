"""A real PostgreSQL server for the tests: initdb + pg_ctl from the system's PostgreSQL.

``PostgresServer.start()`` makes a cluster in a fresh directory under /tmp and starts it on
127.0.0.1 at a free port (and on a unix socket in the same directory), with password
authentication over TCP: the superuser ``postgres`` and the user ``keel`` (owner of the
database ``keel``) have the password ``PASSWORD``, which keel gets the way a user gives it,
from ``PGPASSWORD``. PostgreSQL refuses to run as root: as root, every server command runs as
``nobody``, which owns the directory. The binaries come from the OS package (``postgresql`` in
.ci/run's apt line); :func:`postgres_bin` finds them, or None when PostgreSQL is not installed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

PASSWORD = "keel-test-password"
USER = "keel"
DATABASE = "keel"
SEARCH = "/usr/lib/postgresql/*/bin"


def postgres_bin() -> Path | None:
    """The directory of the newest installed PostgreSQL's initdb and pg_ctl, or None."""
    found = [Path(p) for p in glob.glob(SEARCH) if (Path(p) / "initdb").is_file()]
    if not found:
        initdb = shutil.which("initdb")
        return Path(initdb).parent if initdb else None

    def version(path: Path) -> tuple[int, ...]:
        parts = path.parent.name.split(".")
        return tuple(int(p) for p in parts if p.isdigit())

    return max(found, key=version)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One throwaway cluster; ``url()`` names a database in it for keel.toml."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="keel-pg-", dir="/tmp"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = _free_port()
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            import pwd

            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self._as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        self.dir.chmod(0o755)

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bindir / argv[0]), *argv[1:]],
            cwd=self.dir,
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            **self._as,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr}{self.log_text()}")
        return done

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def init(self) -> None:
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._as:
            os.chown(pwfile, self._as["user"], self._as["group"])
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--no-locale", "-E", "UTF8",
            "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
        )  # fmt: skip
        pwfile.unlink()

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=100"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def setup_database(self) -> None:
        self.psql(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
        self.psql(f"CREATE DATABASE {DATABASE} OWNER {USER}")

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` as the superuser over the unix socket; its output."""
        done = self._run(
            "psql", "-h", str(self.dir), "-p", str(self.port), "-U", "postgres", "-d", database,
            "-v", "ON_ERROR_STOP=1", "-At", "-c", sql,
        )  # fmt: skip
        return done.stdout

    def url(self, database: str = DATABASE) -> str:
        """keel.toml's ``[journal] url``: TCP on 127.0.0.1, no password in it."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def env(self) -> dict[str, str]:
        """What a keel process needs to log in: the password, from the environment."""
        return {"PGPASSWORD": PASSWORD}

    def create_database(self, name: str) -> str:
        """A fresh database owned by ``keel``; its URL."""
        self.psql(f"CREATE DATABASE {name} OWNER {USER}")
        return self.url(name)

    def destroy(self) -> None:
        self.stop()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir)


def start_server() -> PostgresServer:
    """A running server with the ``keel`` user and database; raises when it cannot start."""
    bindir = postgres_bin()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL is not installed (no initdb under " + SEARCH + ")")
    server = PostgresServer(bindir)
    try:
        server.init()
        for attempt in range(3):  # another process may take the free port before the server
            try:
                server.start()
                break
            except RuntimeError:
                if attempt == 2:
                    raise
                server.port = _free_port()
        server.setup_database()
    except BaseException:
        server.destroy()
        raise
    return server
