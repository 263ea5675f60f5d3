#!/usr/bin/env bash
# Install the real agent clients at pinned versions into DIR (default: <repo>/.clients).
#
#   scripts/install-clients.sh [DIR]
#
# Each client goes into its own npm prefix so their dependency trees never mix:
#   DIR/claude/node_modules/.bin/claude   @anthropic-ai/claude-code@2.1.332
#   DIR/codex/node_modules/.bin/codex     @openai/codex@0.171.0
#   DIR/gemini/node_modules/.bin/gemini   @google/gemini-cli@0.61.0
# Exact versions are pinned: on Node 20 an unpinned install silently picks an older
# Claude Code (engines >=22 on newer releases). Re-running is cheap: a client whose
# installed version already matches is skipped. The tests find DIR via KEEL_CLIENTS_DIR.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:-${KEEL_CLIENTS_DIR:-$here/../.clients}}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

clients=(
  "claude @anthropic-ai/claude-code 2.1.332"
  "codex @openai/codex 0.171.0"
  "gemini @google/gemini-cli 0.61.0"
)

export DISABLE_TELEMETRY=1 npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

installed_version() {  # prefix package
  local pj="$1/node_modules/$2/package.json"
  [[ -f "$pj" ]] && node -p "require('$pj').version" 2>/dev/null || true
}

pids=()
for entry in "${clients[@]}"; do
  read -r name pkg version <<<"$entry"
  prefix="$dir/$name"
  if [[ "$(installed_version "$prefix" "$pkg")" == "$version" ]]; then
    echo "$name: $pkg@$version already installed in $prefix"
    continue
  fi
  mkdir -p "$prefix"
  echo "$name: installing $pkg@$version into $prefix"
  npm install --prefix "$prefix" --no-save --loglevel=error "$pkg@$version" >"$prefix/install.log" 2>&1 &
  pids+=("$!:$name")
done

status=0
for p in "${pids[@]}"; do
  pid="${p%%:*}"; name="${p#*:}"
  if wait "$pid"; then
    echo "$name: done"
  else
    echo "$name: npm install FAILED, see $dir/$name/install.log" >&2
    tail -20 "$dir/$name/install.log" >&2 || true
    status=1
  fi
done

for entry in "${clients[@]}"; do
  read -r name pkg version <<<"$entry"
  got="$(installed_version "$dir/$name" "$pkg")"
  if [[ "$got" != "$version" ]]; then
    echo "$name: expected $pkg@$version, found '${got:-nothing}'" >&2
    status=1
  fi
done
exit "$status"
