"""Throwaway virtualenvs that run this keel: through a .pth, or with keel-guard installed.

``venv_with_keel``: a new venv whose Python imports keel (and everything else) from the test's
own environment, through a .pth naming its site-packages; a test places it where pipx or uv
would have made it. ``venv_with_installed_keel``: a new venv (with pip) holding keel-guard
installed from a wheel (``keel_wheel``), not editable, its runtime dependencies taken from the
test's environment through a .pth naming a directory of links to exactly those: whatever else
the test's environment holds (the extras' packages) stays out of view. No network: pip comes
from ``ensurepip``, keel's wheel is built here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from _support import TIMEOUT, _mkdir_0755

SRC = Path(__file__).resolve().parents[2] / "src"
DISTRIBUTION = "keel-guard"


def venv_with_keel(path: Path) -> Path:
    """A new venv at ``path`` (parents 0755) running this keel through a .pth; its python."""
    _mkdir_0755(path.parent)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib(python), "keel-under-test.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n"
    )
    return python


def purelib(python: Path) -> str:
    """The site-packages directory of the venv ``python`` belongs to."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def venv_with_installed_keel(
    path: Path, *, also: Iterable[str] = (), leave_out: Iterable[str] = ()
) -> Path:
    """A new venv at ``path`` with keel-guard installed from a wheel (not editable); its python.

    Its dependencies, and those of the distributions named in ``also``, come from the test's
    environment (links in ``<path>.deps``), the distributions in ``leave_out`` excepted.
    """
    _mkdir_0755(path.parent)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=TIMEOUT)
    python = path / "bin" / "python"
    view = _dependency_view(Path(f"{path}.deps"), [DISTRIBUTION, *also], {*leave_out})
    Path(purelib(python), "keel-test-deps.pth").write_text(f"{view}\n")
    wheel = keel_wheel(Path(f"{path}.dist"))
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True, timeout=TIMEOUT, env=_offline_pip(),
    )  # fmt: skip
    return python


def keel_wheel(out: Path) -> Path:
    """keel-guard as a wheel in ``out``: this checkout's ``src/keel`` with the metadata hatchling
    wrote from pyproject.toml into the test environment's own install of keel-guard.
    """
    dist = metadata.distribution(DISTRIBUTION)
    info = f"keel_guard-{dist.version}.dist-info"
    files = {
        f"keel/{p.relative_to(SRC / 'keel').as_posix()}": p.read_bytes()
        for p in sorted((SRC / "keel").rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    files[f"{info}/METADATA"] = (dist.read_text("METADATA") or "").encode()
    files[f"{info}/entry_points.txt"] = (dist.read_text("entry_points.txt") or "").encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: keel-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,", ""]).encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"keel_guard-{dist.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def tiny_wheel(out: Path, name: str, version: str) -> Path:
    """A wheel of a package ``name`` whose module holds ``MARK = "<name> <version> (tiny)"``."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"MARK = {name + ' ' + version + ' (tiny)'!r}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{n},sha256={_digest(d)},{len(d)}" for n, d in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,", ""]).encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for n, d in files.items():
            archive.writestr(n, d)
    return wheel


def install_record(python: Path, name: str) -> dict[str, object]:
    """How ``name`` is installed in ``python``'s environment: where, from what, which files."""
    code = (
        "import json, sys\nfrom importlib import metadata\n"
        f"d = metadata.distribution({name!r})\n"
        "print(json.dumps({'location': str(d.locate_file('')), 'version': d.version,"
        " 'direct_url': d.read_text('direct_url.json'), 'record': d.read_text('RECORD')}))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _offline_pip() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dependency_view(view: Path, roots: list[str], leave_out: set[str]) -> Path:
    """``view``: links to the installed files of ``roots``' runtime dependencies (not extras)."""
    view.mkdir(parents=True)
    skip = {_normal(n) for n in leave_out} | {_normal(DISTRIBUTION)}
    for dist in _closure(roots):
        if _normal(dist.metadata["Name"]) in skip:
            continue
        site = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or ()}
        for top in sorted(tops - {"..", "__pycache__"}):
            if (site / top).exists() and not (view / top).exists():
                (view / top).symlink_to(site / top)
    return view


def _closure(roots: list[str]) -> list[metadata.Distribution]:
    """``roots`` and every distribution they require at run time, as installed here."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = _normal(todo.pop())
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python
        found[name] = dist
        for requirement in dist.requires or ():
            spec, _, marker = requirement.partition(";")
            if "extra" not in marker:
                todo.append(re.split(r"[\s<>=!~\[(;]", spec.strip(), maxsplit=1)[0])
    return list(found.values())


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
