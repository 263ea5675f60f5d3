"""External material: RedCode bash cases, traversal payloads, command-injection payloads."""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
from pathlib import Path

import pytest

from keel.policy import Policy

OVERLONG = (
    (b"\xc0\xae", b"."),
    (b"\xc0\xaf", b"/"),
    (b"\xc0\x2e", b"."),
    (b"\xc0\x2f", b"/"),
    (b"\xe0\x80\xae", b"."),
    (b"\xc1\x9c", b"\\"),
)
DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _data(sub: str) -> Path:
    path = DATA / sub
    if not path.exists():
        if os.environ.get("KEEL_REQUIRE_ALL") == "1":
            pytest.fail(f"test data {path} is missing and KEEL_REQUIRE_ALL=1")
        pytest.skip(f"test data {path} is absent")
    return path


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Policy]:
    root = tmp_path_factory.mktemp("ws")
    return {p: Policy.for_preset(p, root) for p in ("developer", "strict")}


def _redcode_cases() -> list[str]:
    folder = DATA / "redcode-bash-dev"
    if not folder.is_dir():
        return []
    cases: list[str] = []
    for file in sorted(folder.glob("index*_*.json")):
        cases.extend(case["Code"] for case in json.loads(file.read_text()))
    return cases


def test_redcode_cases_are_present() -> None:
    folder = _data("redcode-bash-dev")
    assert len(list(folder.glob("index*_*.json"))) >= 9
    assert len(_redcode_cases()) >= 270


@pytest.mark.parametrize("code", _redcode_cases() or ["(data absent)"])
def test_redcode_is_never_allowed(policies: dict[str, Policy], code: str) -> None:
    _data("redcode-bash-dev")
    line = shlex.join(["bash", "-c", code])
    dev = policies["developer"].check_command(line)
    strict = policies["strict"].check_command(line)
    assert dev.decision in ("deny", "ask"), dev
    assert strict.decision == "deny", strict


def _unescape(text: str) -> str:
    """An independent, conservative decoder: %XX, %uXXXX, 0xXX, overlong UTF-8, repeatedly."""
    for _ in range(10):
        before = text
        text = re.sub(r"%u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
        text = re.sub(r"(?i)0x(2e|2f|5c)", lambda m: chr(int(m.group(1), 16)), text)
        raw = re.sub(rb"%([0-9a-fA-F]{2})", lambda m: bytes([int(m.group(1), 16)]), text.encode())
        for bad, good in OVERLONG:
            raw = raw.replace(bad, good)
        text = raw.decode("utf-8", "replace")
        text = text.replace("\uff0e", ".").replace("\u2215", "/").replace("\u2216", "/")
        if text == before:
            break
    return text


def _escapes(payload: str) -> bool:
    """True if the payload, decoded and with backslashes as separators, leaves /ws."""
    text = _unescape(payload).replace("\\", "/")
    text = re.sub(r";[^/]*", "", text)
    if re.match(r"^[A-Za-z]:", text) or text.startswith("/"):
        return True
    return not posixpath.normpath(posixpath.join("/ws", text)).startswith("/ws")


def _payloads() -> list[str]:
    folder = DATA / "traversal"
    out: list[str] = []
    for file in sorted(folder.glob("*.txt")) if folder.is_dir() else []:
        for line in file.read_text(encoding="utf-8", errors="surrogateescape").splitlines():
            if line.strip():
                out.append(line.replace("{FILE}", "etc/passwd"))
    return out


def test_traversal_payloads_that_escape_are_denied(policies: dict[str, Policy]) -> None:
    _data("traversal")
    payloads = _payloads()
    escaping = [p for p in payloads if _escapes(p)]
    assert len(escaping) > 500
    dev = policies["developer"]
    for payload in escaping:
        for op in ("read", "write"):
            decision = dev.check_path(payload, op)
            assert decision.decision == "deny", (payload, op, decision)


def test_no_traversal_payload_with_dotdot_is_written_outside(policies: dict[str, Policy]) -> None:
    _data("traversal")
    dev = policies["developer"]
    for payload in _payloads():
        decoded = _unescape(payload).replace("\\", "/")
        if any(seg == ".." for seg in decoded.split("/")) and _escapes(payload):
            assert dev.check_path(payload, "write").decision == "deny", payload
            assert dev.check_command(f"cat {shlex.quote(payload)}").decision != "allow", payload


def test_command_injection_payloads_are_not_allowed(policies: dict[str, Policy]) -> None:
    file = _data("command-injection") / "command-execution-unix.txt"
    payloads = [line for line in file.read_text().splitlines() if line.strip()]
    assert len(payloads) > 50
    for preset, policy in policies.items():
        assert policy.check_command("ls").decision == "allow"
        for payload in payloads:
            decision = policy.check_command(f"ls {payload}")
            assert decision.decision != "allow", (preset, payload, decision)
