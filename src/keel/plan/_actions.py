"""The final actions a plan may commit to without a model, and what each one touches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from keel.probes import Param

Effect = Literal["none", "write", "run"]


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """A registered final action."""

    name: str
    params: tuple[Param, ...]
    effect: Effect
    """``write`` and ``run`` actions need evidence and the policy's consent."""
    summary: str
    aliases: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description."""
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "params": [
                {"name": p.name, "type": p.type, "required": p.required} for p in self.params
            ],
            "effect": self.effect,
            "summary": self.summary,
        }


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("output.result", (Param("message", "any"),), "none",
               "report a result (templated message)", ("output.print", "result")),
    ActionSpec("ui.prompt_user", (Param("message", "any"),), "none",
               "show the user a message or question", ("ui.prompt", "prompt_user")),
    ActionSpec("file.write", (Param("path", "path"), Param("content", "str")), "write",
               "write a file in the workspace (policy-checked)", ("fs.write",)),
    ActionSpec("file.append", (Param("path", "path"), Param("content", "str")), "write",
               "append to a file in the workspace (policy-checked)", ("fs.append",)),
    ActionSpec("patch.apply", (Param("patch", "str"),), "write",
               "apply a unified diff atomically (policy-checked)", ("apply_patch",)),
    ActionSpec("command.run",
               (Param("command", "str"), Param("timeout", "number", required=False)), "run",
               "run a command in the sandbox on a scratch copy (policy-checked)",
               ("shell.run", "cmd.run")),
)  # fmt: skip

_BY_NAME = {name: spec for spec in ACTIONS for name in (spec.name, *spec.aliases)}


def resolve_action(name: str) -> ActionSpec | None:
    """The final action called ``name`` (or an alias)."""
    return _BY_NAME.get(name)
