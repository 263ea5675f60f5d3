"""keel: a control layer that makes LLM coding agents predictable, auditable and safe.

Importing keel has no side effects: no output, no files, no environment changes, and no
imports: the public names are loaded on first use, so a hook process that needs one module
pays for that one.
"""

TYPE_CHECKING = False  # typing costs ~9 ms to import; pyright still reads this block
if TYPE_CHECKING:
    from keel.core.calls import ToolCall, ToolResult
    from keel.core.decision import Decision, Guidance
    from keel.core.errors import KeelError
    from keel.core.events import Event

__all__ = ["Decision", "Event", "Guidance", "KeelError", "ToolCall", "ToolResult"]
__version__ = "0.1.0"

_HOMES = {
    "Decision": "keel.core.decision",
    "Event": "keel.core.events",
    "Guidance": "keel.core.decision",
    "KeelError": "keel.core.errors",
    "ToolCall": "keel.core.calls",
    "ToolResult": "keel.core.calls",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'keel' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(home), name)
