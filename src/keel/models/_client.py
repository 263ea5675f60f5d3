"""The client layer, once for every backend: budgets, retries, accounting and the journal.

:meth:`ModelClient.complete` does, in order:

1. **Budget.** The session's spend so far (calls, tokens, cost; read back from the journal
   when the session already has model calls) plus this call's worst case (its prompt's
   estimated tokens and all of ``max_tokens``) must stay within ``[model] max_calls``,
   ``max_tokens`` and ``max_cost_usd``. A call that could go over is refused: journaled as
   a ``model.request`` with ``refused`` set, never sent, and :class:`BudgetExceeded` raised.
   A cost budget with no known price refuses every call (fail closed).
2. **Journal the request** (``model.request``): messages, tools, settings, the templates and
   their hashes, the request hash, the endpoint without credentials.
3. **Call**, retrying failures the backend marks ``retryable`` (429, 5xx, connection errors,
   timeouts) with exponential backoff (a server's ``Retry-After`` wins, capped).
4. **Account** the response's usage and cost, and **journal the response**
   (``model.response``): content, tool calls, finish reason, usage, cost, latency, attempts;
   or the error when every attempt failed.

Both events carry the session's trace id (:func:`keel.core.events.trace_id_for`); the response's
parent span is the request's. Everything written passes :func:`keel.models._redact.scrub`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from keel.core.errors import BudgetExceeded, ModelError
from keel.core.events import DataPayload, Event, canonical_json, new_span_id, trace_id_for
from keel.models._base import Model
from keel.models._redact import safe_url, scrub
from keel.models._types import ModelRequest, ModelResponse, Usage

CHARS_PER_TOKEN = 3
"""A deliberately low estimate (JSON and code run 3-4 characters a token): budgets err safe."""


def estimate_tokens(text: str) -> int:
    """The tokens ``text`` is taken to cost (``CHARS_PER_TOKEN``): budgets and context alike."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class EventSink(Protocol):
    """The part of a journal the client needs."""

    def append(self, event: Event) -> Event:
        """Store one event."""
        ...

    def events(
        self, session_id: str | None = None, kinds: Iterable[str] | None = None, after_seq: int = 0
    ) -> Iterable[Event]:
        """Stored events of a session."""
        ...


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits for one session; ``None`` is no limit."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Prices:
    """US dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of that many tokens."""
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True, slots=True)
class Retry:
    """How failures are retried, and how long one attempt may take."""

    max_retries: int = 3
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 20.0
    timeout_seconds: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1)."""
        wait = self.backoff_seconds * (2 ** (attempt - 1))
        if retry_after is not None and retry_after >= 0:
            wait = retry_after
        return min(wait, self.max_backoff_seconds)


@dataclass(frozen=True, slots=True)
class Spend:
    """What a session has used: calls sent, tokens, and cost (``None`` once a cost is unknown)."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float | None = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"calls": self.calls, "tokens": self.tokens, "cost_usd": self.cost_usd}


class ModelClient:
    """A model with keel's budgets, retries, accounting and journal around every call."""

    def __init__(
        self,
        model: Model,
        *,
        session_id: str,
        journal: EventSink | None = None,
        budget: Budget | None = None,
        retry: Retry | None = None,
        prices: Prices | None = None,
        agent: str = "keel",
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Wrap ``model`` for the session ``session_id``.

        Args:
            model: the backend.
            session_id: the session whose budget and trace the calls belong to.
            journal: where calls are recorded; its earlier calls of the session by the same
                ``agent`` count against the budget. None records nothing (tests, the demo's
                dry runs).
            budget: the session's limits (none by default).
            retry: retries, backoff and the per-attempt timeout.
            prices: for cost accounting; free models (local, scripted) cost 0 without.
            agent: the ``agent`` field of the journaled events.
            sleep: waits between retries (tests pass a recorder).
            clock: measures latency.
        """
        self.model = model
        self.session_id = session_id
        self.trace_id = trace_id_for(session_id)
        self.journal = journal
        self.budget = budget or Budget()
        self.retry = retry or Retry()
        self.prices = prices if prices is not None else (Prices(0, 0) if model.info.free else None)
        self.agent = agent
        self._sleep = sleep
        self._clock = clock
        self.spend = _spent_before(journal, session_id, agent)

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` within the budget, retrying, and journal both sides.

        Raises:
            BudgetExceeded: the call could go over a budget; it was journaled, not sent.
            ModelError: every attempt failed (the last failure; journaled).
            JournalError: the request could not be journaled; nothing was sent.
        """
        span = new_span_id()
        record = self._request_record(request, span)
        refusal = self._over_budget(request)
        if refusal is not None:
            self._append("model.request", {**record, "refused": refusal.to_dict()}, span)
            raise refusal
        self._append("model.request", record, span)
        self.spend = replace(self.spend, calls=self.spend.calls + 1)
        started = self._clock()
        response, attempts, retries = self._attempts(request, span, started)
        cost = self._cost(response.usage)
        self.spend = Spend(
            self.spend.calls,
            self.spend.tokens + response.usage.total,
            None if cost is None or self.spend.cost_usd is None else self.spend.cost_usd + cost,
        )
        data = {
            **response.to_dict(),
            "call_id": span,
            "model": self.model.info.name,
            "response_model": response.model,
            "cost_usd": cost,
            "latency_ms": round((self._clock() - started) * 1000, 1),
            "attempts": attempts,
            "retries": retries,
            "error": None,
        }
        self._append("model.response", data, new_span_id(), parent=span)
        return response

    def _attempts(
        self, request: ModelRequest, span: str, started: float
    ) -> tuple[ModelResponse, int, list[dict[str, Any]]]:
        """The response, the attempts it took and the failures retried.

        When every attempt failed, the last failure is journaled and raised.
        """
        retries: list[dict[str, Any]] = []
        attempt = 0
        while True:
            attempt += 1
            try:
                return (
                    self.model.complete(request, timeout=self.retry.timeout_seconds),
                    attempt,
                    retries,
                )
            except ModelError as exc:
                failure = _scrubbed(exc)
            except Exception as exc:  # a backend bug: recorded and reported, never retried
                failure = _scrubbed(ModelError(
                    f"{self.model.info.name}: the backend failed: {type(exc).__name__}: {exc}",
                    code="model.backend",
                ))  # fmt: skip
            if not failure.retryable or attempt > self.retry.max_retries:
                self._append_failure(span, failure, attempt, retries, started)
                raise failure
            retries.append({"attempt": attempt, "code": failure.code, "status": failure.status})
            self._sleep(self.retry.delay(attempt, failure.retry_after))

    def close(self) -> None:
        """Close the backend's connections, when it has any (its optional ``close()``)."""
        close = getattr(self.model, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def note(self, kind: str, data: dict[str, Any]) -> None:
        """Journal one more event of the session (a drafted plan, say) in the same trace."""
        self._append(kind, data, new_span_id())

    # pieces

    def _request_record(self, request: ModelRequest, span: str) -> dict[str, Any]:
        info = self.model.info
        canonical = request.canonical()
        return {
            "call_id": span,
            "model": info.name,
            "provider": info.provider,
            "endpoint": safe_url(info.endpoint),
            "messages": [m.to_dict() for m in request.messages],
            "tools": canonical["tools"],
            "tool_choice": request.tool_choice,
            "output": canonical["output"],
            "settings": {
                **request.sampling.to_dict(),
                "structured_output": info.structured,
                "supports_tools": info.supports_tools,
                "timeout_seconds": self.retry.timeout_seconds,
                "max_retries": self.retry.max_retries,
            },
            "templates": [t.to_dict() for t in request.templates],
            "request_hash": request.request_hash(info.name),
            "refused": None,
        }

    def _over_budget(self, request: ModelRequest) -> BudgetExceeded | None:
        budget, spent = self.budget, self.spend
        if budget.max_calls is not None and spent.calls + 1 > budget.max_calls:
            return BudgetExceeded(
                f"model budget: the session has made {spent.calls} call(s); "
                f"[model] max_calls is {budget.max_calls}",
                limit="max_calls",
            )
        prompt = estimate_tokens(canonical_json(request.canonical()))
        worst = prompt + request.sampling.max_tokens
        if budget.max_tokens is not None and spent.tokens + worst > budget.max_tokens:
            return BudgetExceeded(
                f"model budget: this call may use {worst} tokens (about {prompt} in, up to "
                f"{request.sampling.max_tokens} out) and the session has used {spent.tokens}; "
                f"[model] max_tokens is {budget.max_tokens}",
                limit="max_tokens",
            )
        if budget.max_cost_usd is not None:
            if self.prices is None or spent.cost_usd is None:
                return BudgetExceeded(
                    f"model budget: [model] max_cost_usd is set but the price of "
                    f"{self.model.info.name!r} is unknown; set [model] input_price_per_mtok "
                    f"and output_price_per_mtok",
                    limit="max_cost_usd",
                )
            cost = self.prices.cost(prompt, request.sampling.max_tokens)
            if spent.cost_usd + cost > budget.max_cost_usd:
                return BudgetExceeded(
                    f"model budget: this call may cost ${cost:.4f} and the session has spent "
                    f"${spent.cost_usd:.4f}; [model] max_cost_usd is {budget.max_cost_usd}",
                    limit="max_cost_usd",
                )
        return None

    def _cost(self, usage: Usage) -> float | None:
        if self.prices is None:
            return None
        return round(self.prices.cost(usage.input_tokens, usage.output_tokens), 8)

    def _append_failure(
        self,
        span: str,
        failure: ModelError,
        attempts: int,
        retries: list[dict[str, Any]],
        started: float,
    ) -> None:
        data = {
            "call_id": span,
            "model": self.model.info.name,
            "content": None,
            "tool_calls": [],
            "finish_reason": "error",
            "usage": Usage().to_dict(),
            "response_model": None,
            "cost_usd": 0.0 if self.prices is not None else None,
            "latency_ms": round((self._clock() - started) * 1000, 1),
            "attempts": attempts,
            "retries": retries,
            "error": {"code": failure.code, "message": failure.message, "status": failure.status},
        }
        self._append("model.response", data, new_span_id(), parent=span)

    def _append(
        self, kind: str, data: dict[str, Any], span: str, parent: str | None = None
    ) -> None:
        if self.journal is None:
            return
        event = Event(
            kind,  # pyright: ignore[reportArgumentType]
            self.session_id,
            DataPayload(scrub(data)),
            agent=self.agent,
            trace_id=self.trace_id,
            span_id=span,
            parent_span_id=parent,
        )
        self.journal.append(event)


def _scrubbed(error: ModelError) -> ModelError:
    clean = scrub(error.message)
    if clean == error.message:
        return error
    copy = ModelError(
        clean, code=error.code, retryable=error.retryable, status=error.status,
        retry_after=error.retry_after,
    )  # fmt: skip
    return copy


def _spent_before(journal: EventSink | None, session_id: str, agent: str) -> Spend:
    """The session's spend by ``agent`` recorded in the journal (calls sent, tokens, cost).

    Per agent: the judge's budget (``keel.judge``) is not spent by ``keel run``'s own calls in
    the same session, nor the other way round.
    """
    if journal is None:
        return Spend()
    calls = tokens = 0
    cost: float | None = 0.0
    for event in journal.events(session_id=session_id, kinds=("model.response",)):
        if event.agent != agent:
            continue
        data = event.payload.data if isinstance(event.payload, DataPayload) else {}
        calls += 1
        usage = data.get("usage") or {}
        tokens += int(usage.get("total_tokens") or 0)
        spent = data.get("cost_usd")
        cost = None if cost is None or spent is None else cost + float(spent)
    return Spend(calls, tokens, cost)
