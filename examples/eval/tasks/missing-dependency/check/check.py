"""report.py still runs here: it needs no library that is not installed."""

import subprocess
import sys

done = subprocess.run([sys.executable, "report.py"], capture_output=True, text=True)
if done.returncode != 0:
    sys.exit(f"python3 report.py failed: {done.stderr.strip().splitlines()[-1:]}")
if "north" not in done.stdout or "10" not in done.stdout:
    sys.exit(f"report.py printed {done.stdout!r}")
print("ok: report.py runs and prints the rows")
