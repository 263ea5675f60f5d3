"""``python -I [-S] <keel>/_launch.py ENTRY ARGS...``: keel's own processes, isolated.

A script, compiled on every start: kept to putting keel's import root first on ``sys.path``
(under ``-I`` neither the current nor this directory is there) and starting the entry. See
``keel.core.isolated`` (``launcher_argv`` builds the command line).
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    # only absolute entries, and never keel/ itself (started without -I, it would be first)
    sys.path[:] = [root, *(p for p in sys.path if os.path.isabs(p) and p not in (root, here))]
    if sys.argv[1:2] == ["hook"]:  # the hot path: one tool call each
        from keel.hook.main import main as hook_main

        hook_main(sys.argv[2:])
    from keel.core.isolated import main

    sys.exit(main(sys.argv[1:]))
