"""calc_total ignores negative amounts; no second, differently named copy of it."""

import sys

sys.path.insert(0, ".")  # the workspace, where the check runs

import calc

if hasattr(calc, "compute_total"):
    sys.exit("calc.py gained a compute_total: the function is calc_total")
if calc.calc_total([1, -2, 3]) != 4:
    sys.exit(f"calc_total([1, -2, 3]) is {calc.calc_total([1, -2, 3])}, not 4")
print("ok: calc_total ignores negative amounts")
