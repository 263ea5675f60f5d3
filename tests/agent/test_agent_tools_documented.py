"""What a user needs to script keel's agent is documented: the tools and the script format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from _support import keel
from keel.agent import TOOLS
from keel.models.testing import STEP_KEYS, ScriptedModel

README = Path(__file__).resolve().parents[2] / "README.md"


def test_list_tools_prints_every_tool_with_its_schema(workdir: Path) -> None:
    done = keel("run", "--list-tools", "--json", cwd=workdir)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["tools"]
    assert listed == [tool.to_dict() for tool in TOOLS]
    assert all(t["parameters"]["type"] == "object" for t in listed)
    text = keel("run", "--list-tools", cwd=workdir)
    assert text.returncode == 0 and all(f"{t.name}(" in text.stdout for t in TOOLS)


def _script_section() -> str:
    readme = README.read_text(encoding="utf-8")
    start = readme.index("The script: model")
    return readme[start : readme.index("```toml", start)]


def test_the_readme_documents_every_script_step_key() -> None:
    section = _script_section()
    assert {k for k in STEP_KEYS if f"`{k}`" in section} == set(STEP_KEYS)


def test_the_readme_script_example_loads_and_names_real_tools(tmp_path: Path) -> None:
    (example,) = re.findall(r"```yaml\n(.*?)```", _script_section(), re.S)
    path = tmp_path / "run.yaml"
    path.write_text(example, encoding="utf-8")
    model = ScriptedModel.from_file(path)
    assert len(model.steps) == len(yaml.safe_load(example))
    names = {c["name"] for s in model.steps if isinstance(s, dict) for c in s.get("tool_calls", [])}
    assert names <= {t.name for t in TOOLS}
