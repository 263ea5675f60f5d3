"""last() returns the last item."""

import sys

sys.path.insert(0, ".")  # the workspace, where the check runs

from seq import last

if last([1, 2, 3]) != 3 or last(["a"]) != "a":
    sys.exit("last() does not return the last item")
print("ok: last() works")
