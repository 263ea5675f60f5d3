"""keel: a control layer that makes LLM coding agents predictable, auditable and safe.

Importing keel has no side effects: no output, no files, no environment changes.
"""

from keel.calls import ToolCall, ToolResult
from keel.decision import Decision, Guidance, strictest
from keel.errors import KeelError
from keel.events import Event

__all__ = ["Decision", "Event", "Guidance", "KeelError", "ToolCall", "ToolResult", "strictest"]
__version__ = "0.1.0"
