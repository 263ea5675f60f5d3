"""``Judge.judge(window) -> Judgement``: one model call through ``ModelClient``, cached.

The request is built from packaged prompt files (``keel/judge/prompts``): the system prompt
with a definition and a few-shot example per enabled category (and one of an honest failure,
which is not a problem), and the user prompt carrying the rendered :class:`Window`. The
verdict's JSON Schema goes the model's way: as structured output (``json_schema`` or
``json_object``), else as the ``submit_verdict`` tool, else only described in the prompt.

The call goes through :class:`keel.models.ModelClient`, so the session's budget, the refusal
of a call that could go over it, retries, cost accounting and the ``model.request`` /
``model.response`` journal events are the ones every model call of keel has.

**Cache.** A judgement is cached by (window hash, prompt version, model spec): the prompt
version names every template used, with its version and the SHA-256 of its text, so a changed
prompt never reuses an old verdict. The cache is in memory, and on disk too when given a
directory (``JudgeCache.for_workspace(root)``: ``<root>/.keel/judge/cache/``, one JSON file
per key, written atomically; an unreadable or invalid file is a miss). A cache hit makes no
model call and journals nothing.

**Delivery.** A verdict is deliverable when it is a problem, in an enabled category, with
``confidence >= min_confidence``; otherwise its status says why not (``clear``,
``category_off``, ``below_threshold``). The threshold is applied when judging, not cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from keel.core.errors import JudgeError
from keel.core.events import canonical_json
from keel.core.root import state_path
from keel.guard.judging import due as triggers_of
from keel.judge._verdict import (
    CATEGORIES,
    SUBMIT_TOOL,
    VERDICT_SCHEMA,
    Category,
    Verdict,
    parse_verdict,
)
from keel.models import (
    Budget,
    EventSink,
    Message,
    Model,
    ModelClient,
    ModelRequest,
    OutputSchema,
    Prices,
    PromptTemplate,
    Retry,
    Sampling,
    Tool,
    load_prompt,
)

if TYPE_CHECKING:
    from keel.core.decision import GuidanceLevel
    from keel.core.schema import JudgeConfig, JudgeWhen, ModelConfig
    from keel.judge._window import Window

Status = Literal["deliverable", "clear", "below_threshold", "category_off"]
"""What becomes of a verdict: delivered as guidance, or journaled only (and why)."""
PACKAGE = "keel.judge"
SAMPLING = Sampling(temperature=0.0, max_tokens=400, seed=0)
"""A verdict is short; the budget's worst case counts all of ``max_tokens``."""


@dataclass(frozen=True, slots=True)
class Judgement:
    """A verdict on one window, and what it cost."""

    window_hash: str
    verdict: Verdict
    status: Status
    model: str
    """The model spec that judged."""
    prompt: str
    """The prompt version: every template as ``id@version:sha256-prefix``."""
    cached: bool
    """True when it came from the cache (no model call, no cost)."""
    cost_usd: float | None
    """The call's cost (0 when cached; None when the price is unknown)."""
    latency_ms: float

    @property
    def deliverable(self) -> bool:
        """True when the verdict may be delivered as guidance."""
        return self.status == "deliverable"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "window_hash": self.window_hash,
            "verdict": self.verdict.to_dict(),
            "status": self.status,
            "deliverable": self.deliverable,
            "model": self.model,
            "prompt": self.prompt,
            "cached": self.cached,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
        }


class JudgeCache:
    """Verdicts by key, in memory and optionally in a directory (one JSON file per key)."""

    def __init__(self, directory: Path | None = None) -> None:
        """A cache, persisted under ``directory`` when one is given."""
        self.directory = directory
        self._memory: dict[str, Verdict] = {}

    @classmethod
    def for_workspace(cls, root: Path) -> JudgeCache:
        """The workspace's on-disk cache: ``<root>/.keel/judge/cache/``."""
        return cls(Path(state_path(root, "judge", "cache")))

    @staticmethod
    def key(window_hash: str, prompt: str, model: str) -> str:
        """The cache key of (window hash, prompt version, model spec)."""
        body = canonical_json({"window": window_hash, "prompt": prompt, "model": model})
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    def get(self, key: str) -> Verdict | None:
        """The cached verdict, or None (a damaged file on disk is a miss)."""
        if key in self._memory:
            return self._memory[key]
        if self.directory is None:
            return None
        try:
            data = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
            verdict = Verdict.from_data(data)
        except (OSError, ValueError, JudgeError):
            return None
        self._memory[key] = verdict
        return verdict

    def put(self, key: str, verdict: Verdict) -> None:
        """Remember ``verdict`` (on disk too, atomically, when the cache has a directory).

        A directory that cannot be written keeps the verdict in memory only.
        """
        self._memory[key] = verdict
        if self.directory is None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(verdict.to_dict(), handle, sort_keys=True)
            os.replace(tmp, self.directory / f"{key}.json")
        except OSError:
            return  # an unwritable cache costs a later call, never this verdict

    def __len__(self) -> int:
        return len(self._memory)


class Judge:
    """Asks a model, through a :class:`ModelClient`, what a window of a trajectory shows."""

    def __init__(
        self,
        client: ModelClient,
        *,
        min_confidence: float = 0.7,
        categories: Iterable[Category] = CATEGORIES,
        cache: JudgeCache | None = None,
        sampling: Sampling = SAMPLING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """A judge calling through ``client``.

        Args:
            client: the model with the session's budget and journal.
            min_confidence: verdicts below it are not deliverable.
            categories: the categories looked for (the prompt defines only these).
            cache: where verdicts are kept (a fresh in-memory cache by default).
            sampling: the call's sampling settings.
            clock: measures latency.
        """
        self.client = client
        self.min_confidence = min_confidence
        wanted = set(categories)
        self.categories: tuple[Category, ...] = tuple(c for c in CATEGORIES if c in wanted)
        self.cache = cache if cache is not None else JudgeCache()
        self.sampling = sampling
        self._clock = clock
        self._system, self._user, self._parts = _templates(self.categories)
        self.prompt = ";".join(
            f"{t.id}@{t.version}:{t.sha256[:12]}" for t in (self._system, self._user, *self._parts)
        )

    @property
    def model(self) -> str:
        """The model spec the judge calls."""
        return self.client.model.info.name

    def judge(self, window: Window) -> Judgement:
        """The verdict on ``window``: from the cache, else from one model call.

        Raises:
            BudgetExceeded: the call could go over the judge's budget (journaled, not sent).
            JudgeError: the model answered no valid verdict (journaled).
            ModelError: the call failed after its retries (journaled).
        """
        key = JudgeCache.key(window.hash, self.prompt, self.model)
        cached = self.cache.get(key)
        if cached is not None:
            return self._judgement(window, cached, cached=True, cost=0.0, latency=0.0)
        before = self.client.spend.cost_usd
        started = self._clock()
        response = self.client.complete(self.request(window))
        latency = round((self._clock() - started) * 1000, 1)
        after = self.client.spend.cost_usd
        cost = None if before is None or after is None else round(after - before, 8)
        verdict = parse_verdict(response, window.step_numbers)
        self.cache.put(key, verdict)
        return self._judgement(window, verdict, cached=False, cost=cost, latency=latency)

    def request(self, window: Window) -> ModelRequest:
        """The request for ``window``, its schema sent as the model can take it."""
        info = self.client.model.info
        system = self._system.render(
            categories="\n".join(t.text.strip() for t in self._parts if ".category." in t.id),
            examples="\n\n".join(t.text.strip() for t in self._parts if ".example." in t.id),
        )
        messages = (Message.system(system), Message.user(self._user.render(window=window.render())))
        schema = schema_for(window)
        output = OutputSchema("keel_verdict", schema) if info.structured != "off" else None
        tools: tuple[Tool, ...] = ()
        if output is None and info.supports_tools:
            tools = (Tool(SUBMIT_TOOL, "Submit the verdict on the trajectory.", schema),)
        uses = tuple(t.use for t in (self._system, self._user, *self._parts))
        choice = SUBMIT_TOOL if tools else None
        return ModelRequest(messages, tools, choice, output, self.sampling, uses)

    def status(self, verdict: Verdict) -> Status:
        """What becomes of ``verdict`` under this judge's threshold and categories."""
        if verdict.category is None or not verdict.problem:
            return "clear"
        if verdict.category not in self.categories:
            return "category_off"
        if verdict.confidence < self.min_confidence:
            return "below_threshold"
        return "deliverable"

    def _judgement(
        self, window: Window, verdict: Verdict, *, cached: bool, cost: float | None, latency: float
    ) -> Judgement:
        return Judgement(
            window.hash, verdict, self.status(verdict), self.model, self.prompt, cached, cost,
            latency,
        )  # fmt: skip


def schema_for(window: Window) -> dict[str, Any]:
    """``VERDICT_SCHEMA`` with ``evidence`` limited to the steps ``window`` shows.

    A model held to the schema (structured output, a local model's grammar) then cannot cite
    a step it was not shown, which :func:`parse_verdict` would refuse (``judge.evidence``).
    """
    shown = sorted(window.step_numbers)
    if not shown:
        return VERDICT_SCHEMA
    schema = json.loads(json.dumps(VERDICT_SCHEMA))
    schema["properties"]["evidence"]["items"] = {"type": "integer", "enum": shown}
    return schema


def _templates(
    categories: tuple[Category, ...],
) -> tuple[PromptTemplate, PromptTemplate, tuple[PromptTemplate, ...]]:
    """The system and user templates, and the definition and example of each category."""
    parts = [load_prompt(f"judge.category.{c}", PACKAGE) for c in categories]
    parts += [load_prompt(f"judge.example.{c}", PACKAGE) for c in categories]
    parts.append(load_prompt("judge.example.ok", PACKAGE))
    return load_prompt("judge.system", PACKAGE), load_prompt("judge.user", PACKAGE), tuple(parts)


def judge_client(
    model: Model,
    settings: JudgeConfig,
    model_settings: ModelConfig | None = None,
    *,
    session_id: str,
    journal: EventSink | None = None,
) -> ModelClient:
    """A :class:`ModelClient` with ``[judge]``'s budget, timeout and prices.

    Retries and backoff are ``[model]``'s. The budget counts the session's journaled model
    calls, as every ``ModelClient`` does.
    """
    prices = None
    if settings.input_price_per_mtok is not None and settings.output_price_per_mtok is not None:
        prices = Prices(settings.input_price_per_mtok, settings.output_price_per_mtok)
    retry = Retry(timeout_seconds=settings.timeout_seconds)
    if model_settings is not None:
        retry = Retry(
            max_retries=model_settings.max_retries,
            backoff_seconds=model_settings.retry_backoff_seconds,
            timeout_seconds=settings.timeout_seconds,
        )
    return ModelClient(
        model,
        session_id=session_id,
        journal=journal,
        budget=Budget(max_calls=settings.max_calls, max_cost_usd=settings.max_cost_usd),
        retry=retry,
        prices=prices,
        agent="keel.judge",
    )


def judge_for(
    client: ModelClient, settings: JudgeConfig, *, cache: JudgeCache | None = None
) -> Judge:
    """A :class:`Judge` with ``[judge]``'s threshold and categories."""
    enabled: list[Category] = [c for c in CATEGORIES if getattr(settings.categories, c)]
    return Judge(client, min_confidence=settings.min_confidence, categories=enabled, cache=cache)


def due(
    when: JudgeWhen, *, step: int, finding: GuidanceLevel | None = None, finishing: bool = False
) -> bool:
    """Whether ``[judge.when]`` schedules a judgement now (``keel.guard.judging.due``)."""
    return bool(triggers_of(when, step=step, finding=finding, finishing=finishing))
