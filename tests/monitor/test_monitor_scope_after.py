"""The scope detector after a call: files a shell command changed as it ran (issue 24 item 14).

A command line does not name every file it writes (``python3 -c ...``); the guard hands the
monitor the files its checkpoints saw change (``after_call(result, changed)``), and those
outside ``[scope]`` get the scope detector's guidance.
"""

from __future__ import annotations

from keel.config import parse_config
from keel.core.calls import ToolCall, ToolResult
from keel.monitor import Monitor

SCOPE = '[scope]\ninclude = ["src/**", "tests/**"]\nexclude = ["src/vendor/**"]\n'
LINE = "python3 -c \"open('README.md','w').write('x')\""


def _after(changed: tuple[str, ...]) -> tuple[Monitor, object]:
    monitor = Monitor(parse_config(SCOPE))
    call = ToolCall("Bash", "exec", command=LINE, tool_use_id="t1", cwd="/w")
    assert monitor.before_call(call) is None  # the line names no file: nothing to judge before
    result = ToolResult("Bash", "exec", True, "", None, 0, "t1", call=call)
    return monitor, monitor.after_call(result, changed)


def test_files_changed_outside_scope_get_the_scope_guidance() -> None:
    monitor, told = _after(("src/x.py", "README.md", "src/vendor/lib.py"))
    assert told is not None and told.detector == "scope" and told.level == "correct"
    assert "`README.md`" in told.message and "`src/vendor/lib.py`" in told.message
    assert "src/x.py" not in told.message
    [diagnostic] = [d for d in monitor.drain() if d.detector == "scope"]
    assert diagnostic.evidence["paths"] == ["README.md", "src/vendor/lib.py"]


def test_files_changed_inside_scope_are_not_reported() -> None:
    monitor, told = _after(("src/x.py", "tests/test_x.py"))
    assert told is None
    assert [d for d in monitor.drain() if d.detector == "scope"] == []
