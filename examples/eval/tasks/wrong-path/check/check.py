"""double() lives in the existing module, src/util.py; no stray src/utils.py."""

import sys
from pathlib import Path

if Path("src/utils.py").exists():
    sys.exit("src/utils.py was created: the module is src/util.py")
sys.path.insert(0, "src")
import util  # noqa: E402

if util.double(4) != 8 or util.half(4) != 2:
    sys.exit("src/util.py: double(4) must be 8 and half(4) 2")
print("ok: src/util.py has double()")
