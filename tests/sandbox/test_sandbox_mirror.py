from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from keel.sandbox.probe._python import mirror_import_roots


def test_mirror_is_world_readable_importable_and_reused(workdir: Path) -> None:
    base = workdir / "mirror"
    first = Path(mirror_import_roots(str(base)))
    assert (first / "keel" / "__init__.py").is_file()
    assert (first / "yaml" / "__init__.py").is_file()
    for path in [first, *first.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o005 == 0o005 if path.is_dir() else mode & 0o004, path
    assert not list(first.rglob("__pycache__"))
    assert mirror_import_roots(str(base)) == str(first)
    out = subprocess.run(
        [
            "/usr/bin/python3",
            "-I",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import keel, yaml; print(keel.__file__)",
            str(first),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert out.stdout.startswith(str(first))
