"""The core stays small: no model SDK is imported until its backend is opened, and a missing
extra is a friendly error naming the ``keel install EXTRA`` that fixes it, and the command that
runs for how keel was installed (here: this Python's own pip)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from model_helpers import KEY

from _support import keel, keel_env
from keel.core.errors import ModelError, UsageError
from keel.models import open_model, parse_spec

SDKS = ("openai", "anthropic", "llama_cpp", "httpx")


def test_importing_keel_models_imports_no_sdk() -> None:
    code = (
        "import sys, keel.models, keel.plan.draft, keel.models.testing\n"
        f"print([m for m in {SDKS!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("spec", "module", "extra", "env"),
    [
        ("openai:gpt-x", "openai", "openai", {"OPENAI_API_KEY": KEY}),
        ("anthropic:claude-x", "anthropic", "anthropic", {"ANTHROPIC_API_KEY": KEY}),
        ("local", "llama_cpp", "local", {}),
    ],
)
def test_a_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, spec: str, module: str, extra: str, env: dict[str, str]
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    with pytest.raises(ModelError) as caught:
        open_model(spec, None, environ=env)
    assert caught.value.code == "model.not_installed"
    assert f"keel install {extra}" in caught.value.message
    if extra != "local":  # local: keel install builds llama-cpp-python portably first
        assert f"{sys.executable} -m pip install '{extra}>=" in caught.value.message


def test_the_cli_says_which_extra_to_install(workdir: Path) -> None:
    # keel's CLI ignores PYTHONPATH (issue 22): the SDK is hidden inside the process instead
    hidden = (
        "import sys; sys.modules['openai'] = None\n"
        "from keel.cli._entry import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", hidden, "plan", "draft", "say hi", "--model", "openai:gpt-x"],
        cwd=workdir, env=keel_env({"OPENAI_API_KEY": KEY}), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 1
    assert "keel install openai" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("spec", ["gpt-4", "openai", "script", "nope:x"])
def test_a_bad_spec_is_a_usage_error(spec: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_spec(spec)
    assert caught.value.code == "usage.model"


def test_no_model_anywhere_is_a_usage_error(workdir: Path) -> None:
    done = keel("plan", "draft", "say hi", cwd=workdir)
    assert done.returncode == 2 and "no model" in done.stderr and "[usage.model]" in done.stderr


def test_the_readme_model_config_is_valid_and_complete() -> None:
    from keel.config import ModelConfig, parse_config

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Models and `keel plan draft`", 1)[1].split("\n## ", 1)[0]
    block = section.split("```toml\n", 1)[1].split("```", 1)[0]
    model = parse_config(block).model
    assert model.spec == "openai:gpt-4.1-mini" and model.max_cost_usd == 2.0
    assert model.api_key_env == "MY_LLM_KEY"
    for budget in ("max_calls", "max_tokens", "max_cost_usd"):
        assert budget in block and budget in ModelConfig.field_names()
    for words in ("llama.cpp", "vLLM", "Ollama", "not for\nquality", "json_object"):
        assert words in section
