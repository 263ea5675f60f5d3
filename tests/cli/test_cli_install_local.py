"""``scripts/install-local-model.sh`` installs the local model, never keel (issue 24 item 10).

It once ended with ``pip install -e '.[local]'``: run against a pipx venv, that made keel
editable from the clone, and every hook failed with ``No module named 'keel'`` once the clone
moved. Here it runs against a throwaway venv holding keel-guard installed from a wheel, offline:
llama-cpp-python comes from the portable wheel ``keel install local`` keeps (the test does not
build it), the model's packages and llama-cpp-python's dependencies from the test's environment.
"""

from __future__ import annotations

import os
import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from _support import TIMEOUT, skip_or_fail
from _support.venvs import install_record, venv_with_installed_keel
from keel.cli.install import wheel_dir
from keel.core.installed import requirements

REPO = Path(__file__).resolve().parents[2]
LLAMA = "llama-cpp-python"


@pytest.mark.slow
def test_the_script_installs_the_model_and_leaves_keel_as_it_was(workdir: Path) -> None:
    if not list(wheel_dir().glob("llama_cpp_python-*.whl")):
        skip_or_fail(f"no portable llama-cpp-python wheel in {wheel_dir()} (keel install local)")
    try:
        deps = [r for r in metadata.requires(LLAMA) or [] if "extra" not in r]
    except metadata.PackageNotFoundError:
        skip_or_fail("keel[local] is not installed here: scripts/install-local-model.sh")
    # the view holds the model's packages and llama-cpp-python's dependencies, not itself
    also = [_name(r) for r in (*requirements("local"), *deps)]
    python = venv_with_installed_keel(workdir / "env", also=also, leave_out=[LLAMA])
    before = install_record(python, "keel-guard")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        KEEL_WHEEL_CACHE=str(wheel_dir().parent),
    )
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "install-local-model.sh"), str(python)],
        capture_output=True, text=True, env=env, timeout=TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    llama = install_record(python, LLAMA)
    assert llama["location"] == before["location"], "llama-cpp-python is not in keel's venv"
    assert install_record(python, "keel-guard") == before


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~\[(;]", requirement.strip(), maxsplit=1)[0]
