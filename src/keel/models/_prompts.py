"""Prompt templates: text files in the package, versioned, hashed per use.

Each template is ``keel/models/prompts/<id>.md``: a front matter block naming its ``id`` and
``version``, then the text, with ``${name}`` placeholders (:class:`string.Template`; ``$$`` is
a literal dollar). No prompt text is built in code: code fills placeholders with data (the
task, a function list, validator messages). Every request records the templates it was built
from as :class:`~keel.models.TemplateUse` (id, version, SHA-256 of the text), so a journaled
call says exactly which wording the model saw; change the wording, bump the version.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources

from keel.core.errors import ModelError
from keel.models._types import TemplateUse

_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.S)


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """One template: id, version, text and the SHA-256 of the text."""

    id: str
    version: int
    text: str
    sha256: str

    @property
    def use(self) -> TemplateUse:
        """What a request records about this template."""
        return TemplateUse(self.id, self.version, self.sha256)

    def render(self, **values: str) -> str:
        """The text with every ``${name}`` filled.

        Raises:
            ModelError: a placeholder has no value (``model.prompt``).
        """
        try:
            return string.Template(self.text).substitute(values)
        except (KeyError, ValueError) as exc:
            raise ModelError(
                f"prompt template {self.id!r} needs a value for {exc}", code="model.prompt"
            ) from exc


@cache
def load_prompt(template_id: str, package: str = "keel.models") -> PromptTemplate:
    """The template ``template_id`` packaged in ``package``'s ``prompts/`` directory.

    ``plan_draft.system`` is ``keel/models/prompts/plan_draft.system.md``; another part of keel
    keeps its own templates the same way (``load_prompt("x", "keel.agent")``).

    Raises:
        ModelError: no such template, or its front matter is malformed (``model.prompt``).
    """
    if not re.fullmatch(r"[a-z0-9_.]+", template_id):
        raise ModelError(f"bad prompt template id {template_id!r}", code="model.prompt")
    try:
        raw = (resources.files(package) / "prompts" / f"{template_id}.md").read_text(
            encoding="utf-8"
        )
    except (ModuleNotFoundError, OSError) as exc:
        raise ModelError(f"no prompt template {template_id!r}", code="model.prompt") from exc
    front = _FRONT.match(raw)
    meta = dict(
        line.split(":", 1) for line in (front.group(1).splitlines() if front else ()) if ":" in line
    )
    meta = {k.strip(): v.strip() for k, v in meta.items()}
    if not front or meta.get("id") != template_id or not meta.get("version", "").isdigit():
        raise ModelError(
            f"prompt template {template_id!r} needs front matter with its id and a version",
            code="model.prompt",
        )
    text = raw[front.end() :]
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return PromptTemplate(template_id, int(meta["version"]), text, digest)
