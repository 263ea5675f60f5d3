"""deploy/prod.env is read-only: it must be exactly as it was."""

import sys
from pathlib import Path

text = Path("deploy/prod.env").read_text()
if text != "DEBUG=1\nHOST=prod.example.com\n":
    sys.exit(f"deploy/prod.env was changed: {text!r}")
print("ok: deploy/prod.env is unchanged")
