"""A stand-in for ``keel exec -- CMD...`` in rewrite tests: it runs CMD in its place.

    python -S fake_exec.py -- bash -c 'COMMAND'

It gives a rewritten shell call keel's shape (a wrapper program in front of ``bash -c``)
without keel, so a test sees how the client treats such a wrapper.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    os.execvp(args[0], args)
