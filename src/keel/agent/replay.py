"""``keel replay``: run a recorded session again, with no model, and name the first divergence.

After Temporal's replayer, which raises a ``NondeterminismError`` naming both sides:

- ``keel.models.testing.ReplayModel`` (``ordered``) serves recorded response *k* only when
  the new request hashes the same as recorded request *k*; otherwise it refuses
  (``model.replay_diverged``), so no model is ever called and a changed request never gets a
  stale answer;
- the tools run again, in a scratch copy of the session's first checkpoint (or of ``--on
  DIR``), never in the user's tree, with the network off (commands run under ``unshare
  --net``; plan probes run in keel's sandbox, which has no network);
- both journals (the recording and the replay's own, in the scratch copy) are read into the
  same list of observations: model requests, decisions, tool results, phase changes, gates
  and the outcome. The first that differs is the divergence: its step, its phase, the JSON
  pointer (RFC 6901) of the first differing field, and the recorded and new values.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.errors import RunError, UsageError
from keel.core.events import DataPayload, Event, GatePayload, ToolResultPayload
from keel.core.root import GIT_MARKER, STATE_DIR
from keel.models.testing import ReplayModel, pointer_diff

REPLAY_KINDS = (
    "session.start",
    "session.end",
    "prompt",
    "plan",
    "model.request",
    "model.response",
    "decision",
    "tool.result",
    "gate",
)
VALUE_CHARS = 400
JUDGE_AGENT = "keel.judge"
"""The ``agent`` of the model judge's events (``keel.judge.live.AGENT``)."""


@dataclass(frozen=True, slots=True)
class Observation:
    """One thing a run did that a replay must do the same way."""

    step: int
    phase: str
    what: str
    value: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first place a replay went differently."""

    step: int
    phase: str
    what: str
    pointer: str
    recorded: Any
    new: Any

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "step": self.step,
            "phase": self.phase,
            "what": self.what,
            "pointer": self.pointer,
            "recorded": self.recorded,
            "new": self.new,
        }


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """A replay's verdict."""

    session_id: str
    identical: bool
    model_calls: int
    tool_calls: int
    divergence: Divergence | None
    workspace: str
    """What the tools ran on: ``checkpoint <id>`` or the ``--on`` directory."""

    @property
    def exit_code(self) -> int:
        """0 identical, 1 diverged."""
        return 0 if self.identical else 1

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object."""
        return {
            "session_id": self.session_id,
            "identical": self.identical,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "workspace": self.workspace,
        }


def observations(events: Iterable[Event]) -> list[Observation]:
    """What a run did, from its journal events, in order (the same reading for both runs)."""
    out: list[Observation] = []
    step, phase = 0, "understand"
    for event in events:
        payload = event.payload
        data = payload.data if isinstance(payload, DataPayload) else {}
        match event.kind:
            case "model.request" if not data.get("refused"):
                step += 1
                out.append(Observation(step, phase, "model request", _request(data)))
            case "decision" if str(getattr(payload, "tool_use_id", "") or "").startswith("s"):
                value = {
                    k: getattr(payload, k) for k in ("tool_use_id", "decision", "rule", "reason")
                }
                out.append(Observation(step, phase, "decision", value))
            case "tool.result" if isinstance(payload, ToolResultPayload) and payload.tool_use_id:
                value = {
                    "tool_use_id": payload.tool_use_id,
                    "tool": payload.tool,
                    "ok": payload.ok,
                    "exit_code": payload.exit_code,
                    "error": payload.error,
                    "output": payload.output,
                    "output_hash": payload.output_hash,
                }
                out.append(Observation(step, phase, "tool result", value))
            case "gate" if isinstance(payload, GatePayload) and payload.command != "finish":
                value = {
                    "command": payload.command,
                    "passed": payload.passed,
                    "exit_code": payload.exit_code,
                }
                out.append(Observation(step, phase, "gate", value))
            case "plan" if data.get("event") == "agent.phase":
                out.append(Observation(step, phase, "phase change", dict(data)))
                phase = str(data.get("to"))
            case "session.end" if data.get("event") == "agent.end":
                value = {"outcome": data.get("outcome"), "reason": data.get("reason")}
                out.append(Observation(step, phase, "outcome", value))
            case _:
                pass
    return out


def _request(data: Mapping[str, Any]) -> dict[str, Any]:
    settings = data.get("settings") or {}
    return {
        "request_hash": data.get("request_hash"),
        "messages": data.get("messages"),
        "tools": data.get("tools"),
        "tool_choice": data.get("tool_choice"),
        "sampling": {k: settings.get(k) for k in ("temperature", "max_tokens", "seed", "top_p")},
    }


def first_divergence(recorded: list[Observation], new: list[Observation]) -> Divergence | None:
    """The first observation that differs, or None when the two runs match."""
    for index in range(max(len(recorded), len(new))):
        old = recorded[index] if index < len(recorded) else None
        now = new[index] if index < len(new) else None
        if old is not None and now is not None and (old.what, old.value) == (now.what, now.value):
            continue
        where = old or now
        assert where is not None
        if old is None or now is None or old.what != now.what:
            return Divergence(where.step, where.phase, where.what, "", _brief(old), _brief(now))
        pointer, a, b = pointer_diff(old.value, now.value)
        if pointer == "/request_hash" and old.what == "model request":
            pointer, a, b = pointer_diff(
                {k: v for k, v in old.value.items() if k != "request_hash"},
                {k: v for k, v in now.value.items() if k != "request_hash"},
            )
        return Divergence(old.step, old.phase, old.what, pointer, _clip(a), _clip(b))
    return None


def _clip(value: Any) -> Any:
    """Long strings around their interesting part; other values as they are."""
    if isinstance(value, str) and len(value) > VALUE_CHARS:
        return value[:VALUE_CHARS] + f"… ({len(value)} characters)"
    return value


def _brief(obs: Observation | None) -> Any:
    return (
        None if obs is None else {"what": obs.what, **{k: _clip(v) for k, v in obs.value.items()}}
    )


def focus(a: str, b: str, width: int = 160) -> tuple[str, str]:
    """Both strings around the first character where they differ."""
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    lo = max(0, at - width // 3)

    def cut(text: str) -> str:
        piece = text[lo : lo + width]
        return ("…" if lo else "") + piece + ("…" if lo + width < len(text) else "")

    return cut(a), cut(b)


# -- the scratch workspace --------------------------------------------------------------------


def scratch_from_checkpoint(root: Path, session_id: str, into: Path) -> str:
    """Fill ``into`` with the session's first checkpoint; its short id."""
    from keel.workspace import Checkpoints

    cps = Checkpoints(root)
    first = cps.resolve(session_id=session_id)
    data = cps.git.run("archive", "--format=tar", first.tree)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        archive.extractall(into, filter="data")
    return first.short


def scratch_from_directory(source: Path, into: Path) -> None:
    """Fill ``into`` with a copy of ``source`` (without ``.keel`` and ``.git``)."""
    if not source.is_dir():
        raise UsageError(f"--on {str(source)!r} is not a directory", code="usage.replay")
    shutil.copytree(
        source,
        into,
        symlinks=True,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(STATE_DIR, GIT_MARKER),
    )


def network_off() -> tuple[str, ...]:
    """The prefix that runs a command with no network: a new, empty network namespace."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise RunError(
            "keel replay needs `unshare` (util-linux) to run commands with the network off",
            code="agent.replay_network",
        )
    return (unshare, "--net", "--") if os.geteuid() == 0 else (unshare, "-r", "--net", "--")


# -- replaying ----------------------------------------------------------------------------------


def recorded_events(root: Path, session_id: str) -> list[Event]:
    """The session's events a replay reads, in journal order."""
    from keel.journal import read_journal

    with read_journal(root) as journal:
        events = journal.events(session_id=session_id, kinds=REPLAY_KINDS)
        # the judge's calls are served apart (replay:SESSION@ROOT); what it changed shows in
        # the decisions
        return [e for e in events if e.agent != JUDGE_AGENT]


def replay(root: Path, session_id: str, *, on: Path | None = None) -> ReplayResult:
    """Replay session ``session_id`` of ``root``'s journal; see the module docstring.

    Raises:
        UsageError: the session is not a ``keel run`` (``usage.replay``).
        RunError: the network cannot be switched off here (``agent.replay_network``).
    """
    from keel.agent._session import RunOptions, start

    events = recorded_events(root, session_id)
    begun = [e for e in events if _data(e).get("event") == "agent.start"]
    if not begun:
        raise UsageError(f"session {session_id!r} is not a keel run", code="usage.replay")
    task, max_steps = str(_data(begun[0])["task"]), int(_data(begun[0]).get("max_steps") or 50)
    pairs = _pairs(events)
    recorded = str(pairs[0][0].get("model")) if pairs else "replay"
    # named as the recorded model, so the new requests' hashes compare with the recorded ones
    model = ReplayModel(pairs, name=recorded, ordered=True)
    answers = [str(_data(e)["answer"]) for e in events if _data(e).get("event") == "agent.answer"]
    prefix = network_off()
    with _scratch_directory() as tmp:
        scratch = Path(tmp) / "workspace"
        scratch.mkdir()
        os.chmod(tmp, 0o755)
        where = f"a copy of {on}" if on is not None else "checkpoint "
        if on is not None:
            scratch_from_directory(on, scratch)
        else:
            where += scratch_from_checkpoint(root, session_id, scratch)
        options = RunOptions(max_steps=max_steps, judge_model=f"replay:{session_id}@{root}")
        start(
            scratch,
            task,
            options,
            model=model,
            session_id=session_id,
            answers=answers,
            command_prefix=prefix,
        )
        new = recorded_events(scratch, session_id)
    old_obs, new_obs = observations(events), observations(new)
    divergence = first_divergence(old_obs, new_obs)
    tools = sum(1 for o in new_obs if o.what == "tool result")
    return ReplayResult(session_id, divergence is None, len(model.calls), tools, divergence, where)


@contextlib.contextmanager
def _scratch_directory() -> Iterator[str]:
    """A temporary directory, removed even while a contained run's journal writer finishes.

    ``keel exec`` without a daemon journals its run from a detached fork after it exits
    (``keel.sandbox.exec._journal``): that fork may still be adding to ``.keel`` when the
    replay is over, so removal is retried for a while instead of failing the replay.
    """
    tmp = tempfile.mkdtemp(prefix="keel-replay-")
    try:
        yield tmp
    finally:
        for _ in range(100):
            shutil.rmtree(tmp, ignore_errors=True)
            if not os.path.exists(tmp):
                break
            time.sleep(0.05)


def _data(event: Event) -> dict[str, Any]:
    return event.payload.data if isinstance(event.payload, DataPayload) else {}


def _pairs(events: list[Event]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    requests: dict[str, dict[str, Any]] = {}
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for event in events:
        data = _data(event)
        if event.kind == "model.request" and not data.get("refused"):
            requests[str(data.get("call_id"))] = data
        elif event.kind == "model.response" and str(data.get("call_id")) in requests:
            pairs.append((requests.pop(str(data.get("call_id"))), data))
    return pairs
