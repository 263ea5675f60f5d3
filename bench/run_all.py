"""Run every benchmark script in bench/ (``make bench``); each prints its own results."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    only = sys.argv[1:]
    for script in sorted(here.glob("bench_*.py")):
        if only and script.stem not in only:
            continue
        print(f"== {script.stem}", flush=True)
        sys.argv = [str(script)]  # each script reads its own options, not run_all's
        runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
