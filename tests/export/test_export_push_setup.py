"""How the push is set up and kept: headers from the environment, each span sent once across
restarts, a missing SDK named with its install command, and a hook path that never loads it."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from _support import TIMEOUT, keel_env, make_workspace
from keel.config import ExportConfig, parse_config
from keel.core.errors import ConfigError, RunError
from keel.core.events import DataPayload, DecisionPayload, Event, ToolCallPayload
from keel.core.events import ToolResultPayload as Result
from keel.journal import open_journal, read_journal
from keel.journal import otlp as otlp_mod
from keel.journal.export import Span
from keel.journal.otlp import FailureHandler, OtlpTarget
from keel.journal.push import LivePush

ENDPOINT = "http://127.0.0.1:9/v1/traces"


class Recorder:
    """Stands in for the SDK's pipeline: keeps what it was handed."""

    def __init__(self, target: OtlpTarget, on_failure: FailureHandler) -> None:
        self.target, self.on_failure = target, on_failure
        self.sent: list[str] = []

    def send(self, session_id: str, spans: Iterable[Span]) -> int:
        names = [f"{s.name} {s.span_id}" for s in spans]
        self.sent.extend(names)
        return len(names)

    def close(self) -> None:
        pass


def test_headers_and_proxies_come_from_the_environment_copy() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20generic",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20traces,x-team=keel",
        "HTTPS_PROXY": "http://proxy.invalid:3128",
        "NO_PROXY": "localhost,127.0.0.1",
    }
    target = OtlpTarget.resolve(ENDPOINT, env, timeout=2)
    assert dict(target.headers) == {"authorization": "Bearer traces", "x-team": "keel"}
    assert target.proxies == ()  # 127.0.0.1 is in NO_PROXY
    far = OtlpTarget.resolve("https://otel.example.com/v1/traces", env)
    assert far.proxies == (("https", "http://proxy.invalid:3128"),)
    assert OtlpTarget.resolve(ENDPOINT, {}).headers == ()


def test_the_exporter_sends_protobuf_with_the_environment_headers() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    got: list[tuple[dict[str, str], bytes]] = []

    class Receiver(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        target = OtlpTarget.resolve(url, {"OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cr%3Dt"})
        events = [
            Event("session.start", "s1", DataPayload({}), span_id="1" * 16),
            Event("tool.call", "s1", ToolCallPayload("Bash", "exec", "ls", tool_use_id="t1")),
        ]
        report = otlp_mod.send_events(events, target)
    finally:
        server.shutdown()
        server.server_close()
    assert (report.spans, report.sessions, report.failures) == (2, 1, [])
    ((headers, body),) = got
    assert headers["x-api-key"] == "s3cr=t"
    assert headers["content-type"] == "application/x-protobuf"
    request = ExportTraceServiceRequest.FromString(body)
    spans = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    assert sorted(s.name for s in spans) == ["execute_tool Bash", "invoke_agent keel"]
    (call,) = [s for s in spans if s.name == "execute_tool Bash"]
    assert call.parent_span_id.hex() == "1" * 16  # the journal's ids, as sent


def test_keel_toml_keeps_credentials_out_of_the_endpoint() -> None:
    parsed = parse_config('[export]\notlp_endpoint = "http://127.0.0.1:4318/v1/traces"\n')
    assert parsed.export.otlp_endpoint == "http://127.0.0.1:4318/v1/traces"
    assert parsed.export.timeout_seconds == 10 and parsed.export.include_arguments is False
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_HEADERS") as err:
        parse_config('[export]\notlp_endpoint = "https://user:key@otel.example.com/v1/traces"\n')
    assert err.value.key == "export.otlp_endpoint"
    with pytest.raises(ConfigError, match="not an OTLP/HTTP endpoint"):
        parse_config('[export]\notlp_endpoint = "127.0.0.1:4318"\n')


def _append(root: Path, *events: Event) -> list[Event]:
    with open_journal(root) as journal:
        return [journal.append(e) for e in events]


def _push(root: Path, made: list[Recorder]) -> LivePush:
    def sender(target: OtlpTarget, on_failure: FailureHandler) -> Recorder:
        made.append(Recorder(target, on_failure))
        return made[-1]

    push = LivePush(root, environ={}, config=lambda: ExportConfig(otlp_endpoint=ENDPOINT),
                    sender=sender)  # fmt: skip
    push.watch("s1")
    return push


def test_a_push_that_stops_and_starts_again_sends_each_span_once(workdir: Path) -> None:
    root = make_workspace(workdir)
    start, call, decision = _append(
        root,
        Event("session.start", "s1", DataPayload({})),
        Event("tool.call", "s1", ToolCallPayload("Bash", "exec", "ls", tool_use_id="t1")),
        Event("decision", "s1", DecisionPayload("allow", "r", "ok", tool_use_id="t1")),
    )
    made: list[Recorder] = []
    first = _push(root, made)
    first._guarded(final=False)  # pyright: ignore[reportPrivateUsage]
    assert made[0].sent == [f"apply_guardrail keel {decision.span_id}"]
    # the first process dies here: no final pass; the call and the root were still open
    _append(
        root,
        Event("tool.result", "s1", Result("Bash", True, tool_use_id="t1"), parent_span_id=None),
        Event("session.end", "s1", DataPayload({})),
    )
    second = _push(root, made)
    second._guarded(final=False)  # pyright: ignore[reportPrivateUsage]
    assert sorted(made[1].sent) == sorted(
        [f"invoke_agent keel {start.span_id}", f"execute_tool Bash {call.span_id}"]
    )
    third = _push(root, made)
    third._guarded(final=True)  # pyright: ignore[reportPrivateUsage]
    assert made[2].sent == []  # nothing twice


def test_a_missing_sdk_is_journaled_and_named_with_its_install_command(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_workspace(workdir)
    _append(root, Event("session.start", "s1", DataPayload({})))
    missing = RunError("pushing traces needs the OpenTelemetry SDK: keel install otel",
                       code="export.not_installed")  # fmt: skip
    monkeypatch.setattr(otlp_mod, "sdk_missing", lambda: missing)
    push = _push(root, [])
    push._guarded(final=False)  # pyright: ignore[reportPrivateUsage]
    push._guarded(final=False)  # pyright: ignore[reportPrivateUsage]
    with read_journal(root) as journal:
        errors = [e.payload for e in journal.events(session_id="s1", kinds=["error"])]
    assert len(errors) == 1  # rate-limited: the second failure is counted, not journaled
    assert "keel install otel" in errors[0].data["message"]  # pyright: ignore[reportAttributeAccessIssue]


def test_the_cli_names_the_extra_when_the_sdk_is_missing(workdir: Path) -> None:
    # keel's CLI ignores PYTHONPATH (issue 22): the SDK is hidden inside the process instead
    hidden = (
        "import sys; sys.modules['opentelemetry.sdk'] = None\n"
        "from keel.cli._entry import main; sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", hidden, "export", "--otlp", ENDPOINT],
        cwd=make_workspace(workdir), env=keel_env(), capture_output=True, text=True,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "export.not_installed" in done.stderr
    assert "keel install otel" in done.stderr and "opentelemetry-sdk>=" in done.stderr


def test_the_hook_path_never_imports_the_sdk(workdir: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1] / "hook"))
    from test_hookperf_config import hook_process

    root = make_workspace(workdir, keel_toml=f'[export]\notlp_endpoint = "{ENDPOINT}"\n')
    for n in (1, 2):
        got = hook_process(root, "rm -rf /", n)
        assert got["rc"] == 0 and "risk.rm_recursive" in got["out"], got
        loaded = [m for m in got["modules"] if m.startswith(("opentelemetry", "keel.journal."))]
        assert not [m for m in loaded if not m.startswith(("keel.journal._",))], loaded
