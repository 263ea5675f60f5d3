#!/usr/bin/env bash
# The README's new-user path, run the way a new user runs it, from a fresh clone:
#   1. install keel for daily use into its own environment, `keel` on PATH (README: Install);
#   2. `keel init --agent claude` in a small sample repository (src/, tests/, .env, migrations/);
#   3. `keel doctor`: every client guarded, end to end;
#   4. one guarded call: Claude Code's pre-tool hook, exactly as registered in
#      .claude/settings.json, answers for a dangerous call, an allowed one and a write outside
#      the repository; each answer is then carried out as the client would (nothing for a deny,
#      the rewritten `keel exec` command for an allow) and judged by its effect on disk.
# Everything happens under a temporary HOME; nothing outside it is touched. pip fetches keel's
# dependencies the way `make setup` does (from its cache when it has them).
#
# Usage: scripts/new-user.sh [CHECKOUT]     (default: this repository)
# A checkout with uncommitted changes is cloned and the changed files are copied over the
# clone, so a developer can run the path on work in progress; CI's checkout is clean.
set -euo pipefail

SRC=$(cd "${1:-$(dirname "$0")/..}" && pwd)
PY=${PY:-python3}
WORK=$(mktemp -d /tmp/keel-new-user.XXXXXX)
chmod 755 "$WORK"  # a contained command runs as an unprivileged uid: it must reach the repo
STEP=start
cleanup() {
  status=$?
  if [ -x "$WORK/home/.local/bin/keel" ] && [ -d "$WORK/sample" ]; then
    "$WORK/home/.local/bin/keel" hookd stop --workspace "$WORK/sample" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  if [ "$status" != 0 ]; then
    echo "new-user path FAILED at: $STEP" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
fail() { echo "new-user: $*" >&2; exit 1; }
step() { STEP=$1; echo "== $1"; }

# A new user: a fresh HOME, no keel settings from the caller, a PATH without keel's .venv.
export HOME="$WORK/home"
mkdir -p "$HOME/.local/bin"
for name in $(env | sed -n 's/^\(KEEL_[A-Z_]*\)=.*/\1/p'); do unset "$name"; done
unset VIRTUAL_ENV CLAUDE_PROJECT_DIR GEMINI_PROJECT_DIR CODEX_HOME
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vx "$SRC/.venv/bin" | paste -sd: -)
export PATH="$HOME/.local/bin:$PATH"
export GIT_AUTHOR_NAME=new-user GIT_AUTHOR_EMAIL=new-user@example.invalid
export GIT_COMMITTER_NAME=new-user GIT_COMMITTER_EMAIL=new-user@example.invalid

step "fresh clone of $SRC"
git clone -q "$SRC" "$WORK/keel"
if [ -n "$(git -C "$SRC" status --porcelain)" ]; then
  echo "   (uncommitted changes in $SRC are copied over the clone)"
  git -C "$SRC" ls-files -z --cached --others --exclude-standard \
    | (cd "$SRC" && tar --null -T - -cf - --ignore-failed-read 2>/dev/null) \
    | tar -xf - -C "$WORK/keel"
  git -C "$SRC" ls-files -z --deleted | (cd "$WORK/keel" && xargs -0 -r rm -f --)
fi

step "install (README: python3 -m venv ... && pip install './keel[sandbox]')"
"$PY" -m venv "$HOME/.local/share/keel"
"$HOME/.local/share/keel/bin/python" -m pip install -q --disable-pip-version-check \
  "$WORK/keel[sandbox]"
ln -s "$HOME/.local/share/keel/bin/keel" "$HOME/.local/bin/keel"
hash -r
[ "$(command -v keel)" = "$HOME/.local/bin/keel" ] || fail "keel is not on PATH: $(command -v keel)"
keel --version

step "a sample repository"
mkdir -p "$WORK/sample/src/app" "$WORK/sample/tests" "$WORK/sample/migrations"
cd "$WORK/sample"
printf 'def add(a, b):\n    return a + b\n' >src/app/__init__.py
printf 'from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n' >tests/test_app.py
printf 'API_KEY=not-a-real-secret\n' >.env
printf 'CREATE TABLE t (id INTEGER);\n' >migrations/0001_init.sql
printf '.env\n' >.gitignore
git init -q && git add -A && git commit -q -m initial

step "keel init --agent claude"
keel init --agent claude --scope 'src/**,tests/**'
grep -q "$HOME/.local/share/keel/bin/python" .claude/settings.json \
  || fail "the hook does not run the installed keel"

step "keel doctor"
keel doctor || fail "keel doctor: not every client is guarded"
keel status

step "one guarded call through the registered hook"
cat >"$WORK/client.py" <<'EOF'
"""Play Claude Code for one Bash call: run the registered PreToolUse hook, obey its answer."""
import json, os, subprocess, sys

command, root = sys.argv[1], os.getcwd()
settings = json.load(open(os.path.join(root, ".claude", "settings.json")))
(hook,) = [h for g in settings["hooks"]["PreToolUse"] for h in g["hooks"]]
payload = {"session_id": "new-user", "cwd": root, "hook_event_name": "PreToolUse",
           "tool_name": "Bash", "tool_input": {"command": command},
           "tool_use_id": "toolu_" + str(abs(hash(command))), "permission_mode": "default"}
env = dict(os.environ, CLAUDE_PROJECT_DIR=root)
proc = subprocess.run(["/bin/sh", "-c", hook["command"]], input=json.dumps(payload),
                      capture_output=True, text=True, env=env)
answer = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}
spec = answer.get("hookSpecificOutput", {})
verdict = "deny" if proc.returncode == 2 else spec.get("permissionDecision", "allow")
print(f"{verdict:<5} {command}: {spec.get('permissionDecisionReason') or proc.stderr.strip()}")
if verdict == "allow":  # Claude Code runs the command as the hook rewrote it
    run = spec.get("updatedInput", {}).get("command", command)
    subprocess.run(["bash", "-c", run], env=env, check=False)
EOF
client() { "$PY" "$WORK/client.py" "$1"; }
answer=$(client "rm -rf ~/")
echo "$answer"
case $answer in deny*) ;; *) fail "rm -rf ~/ was not denied" ;; esac
client "touch src/app/made.txt"
[ -f src/app/made.txt ] || fail "an allowed command did not run"
client "echo pwned > $WORK/precious.txt"
[ ! -e "$WORK/precious.txt" ] || fail "a write outside the repository went through"
keel log
keel verify

STEP=done
echo "new-user path OK"
