"""config.json keeps its keys; timeout_s is 30."""

import json
import sys

config = json.load(open("config.json"))
if config != {"name": "app", "timeout_s": 30}:
    sys.exit(f"config.json is {config!r}, not name app with timeout_s 30")
print("ok: timeout_s is 30")
