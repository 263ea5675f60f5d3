"""``keel judge eval`` refuses bad input with a code and an exit status, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judge_helpers import SCRIPT

from keel.cli._entry import main as keel_main


def _eval(argv: list[str], workdir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = keel_main(["judge", "eval", *argv, "--workspace", str(workdir), "--json"])
    return code, capsys.readouterr().err


def _dataset(workdir: Path, text: str) -> Path:
    path = workdir / "cases.jsonl"
    path.write_text(text)
    return path


def test_no_model(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _dataset(workdir, "")
    code, err = _eval([str(data)], workdir, capsys)
    assert code == 2 and json.loads(err)["error"]["code"] == "usage.model"


def test_a_threshold_out_of_range(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _dataset(workdir, "")
    code, err = _eval([str(data), "--model", f"script:{SCRIPT}", "-t", "1.5"], workdir, capsys)
    assert code == 2 and "--threshold" in json.loads(err)["error"]["message"]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("not json\n", ":1: not JSON"),
        ('{"id": "a", "trajectory": "missing.json", "label": "benign"}\n', ":1:"),
        (
            '\n{"id": "a", "trajectory": [], "label": {"category": "laziness", "step": 1}}\n',
            ":2: label",
        ),
        ('{"id": "a", "trajectory": [], "label": {"category": "gaming", "step": 0}}\n', ":1:"),
        ('{"id": "a", "trajectory": [], "label": "benign", "why": 1}\n', ":1: why"),
        ("", "no cases"),
    ],
)
def test_a_bad_dataset_names_the_line(
    text: str, where: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _dataset(workdir, text)
    code, err = _eval([str(data), "--model", f"script:{SCRIPT}"], workdir, capsys)
    error = json.loads(err)["error"]
    assert code == 1 and error["code"] == "judge.dataset"
    assert where in error["message"], error["message"]


def test_an_inline_jsonl_format_trajectory(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"type": "user", "sessionId": "c1", "message": {"role": "user", "content": "Fix it."}},
        {
            "type": "assistant",
            "sessionId": "c1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Bash",
                        "input": {"command": "pytest -q"},
                    }
                ],
            },
        },
    ]
    case = {"id": "inline", "trajectory": lines, "format": "claude", "label": "benign"}
    data = _dataset(workdir, json.dumps(case) + "\n")
    script = workdir / "judge.json"
    ok = {"verdict": "ok", "category": "none", "confidence": 0.9, "evidence": [], "suggestion": ""}
    script.write_text(json.dumps([{"json": ok}]))
    code = keel_main(
        [
            "judge",
            "eval",
            str(data),
            "--model",
            f"script:{script}",
            "--json",
            "--workspace",
            str(workdir),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["runs"][0]["steps"] == 1 and out["calls"] == 1
