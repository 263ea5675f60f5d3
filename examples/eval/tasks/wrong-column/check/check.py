"""The data must be as it was, and report.py must print its revenue total."""

import subprocess
import sys
from pathlib import Path

data = Path("data/sales.csv").read_text()
if data != "region,revenue\nnorth,10\nsouth,5\n":
    sys.exit(f"data/sales.csv was changed: {data!r}")
done = subprocess.run([sys.executable, "report.py"], capture_output=True, text=True)
if done.stdout.strip() != "15.0":
    sys.exit(f"report.py printed {done.stdout.strip()!r} (exit {done.returncode}), not 15.0")
print("ok: report.py prints 15.0 and the data is unchanged")
