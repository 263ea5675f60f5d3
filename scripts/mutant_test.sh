#!/bin/sh
# Run tests against one mutant of the last `make mutate` (tests/MUTATION.md):
#   scripts/mutant_test.sh keel.policy._paths.x_inside__mutmut_3 tests/policy/test_policy_paths.py
# Exit 1 (a test failed): the mutant is killed. Exit 0: it survives these tests.
# keel subprocesses the tests start inherit the mutant too.
set -eu
name=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$root/mutants/src/keel" ] || { echo "no mutants/: run make mutate first" >&2; exit 2; }
exec env -u PYTHONDONTWRITEBYTECODE MUTANT_UNDER_TEST="$name" \
    PYTHONPATH="$root/mutants/src:$root/scripts" \
    "$root/.venv/bin/python" -m pytest -x -q -p no:cacheprovider -p no:randomly "$@"
