"""The policy engine's compiled settings and command tiers (``keel.policy._core.Engine``).

What a snapshot compiles to, a root given through a link, which preset and mode a tier reason
names, the contained allow list, each preset's own tiers.
"""

from __future__ import annotations

import pytest
from policy_helpers import Tree

from keel.policy._core import Engine
from keel.policy._snapshot import default_snapshot


def test_the_engine_compiles_the_snapshot(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = tree.engine(
        unknown="deny", unparseable="deny", network_allow=("x.test",), max_input_bytes=50
    )
    assert (engine.unknown, engine.unparseable) == ("deny", "deny")
    assert engine.network[-1] == "x.test" and "pypi.org" in engine.network
    assert engine.root == str(tree.ws) and engine.root_real == str(tree.ws)
    assert engine.home == str(tree.home)
    assert tuple(engine.check_path("a" * 51, "read"))[:2] == ("deny", "input.too_large")
    assert (engine.command_writes, engine.file_writes, engine.runs_code) == (True, True, False)
    assert tree.engine(contained=True).runs_code is True
    assert tree.engine("strict", contained=True).runs_code is False
    assert tree.engine(preset="strict").preset == "strict"
    assert Engine(default_snapshot("strict"), str(tree.ws), "readonly").preset == "readonly"
    assert tree.engine().cdpath is False
    monkeypatch.setenv("CDPATH", "/x")
    assert tree.engine().cdpath is True


def test_a_root_given_through_a_link_is_compared_in_both_forms(tree: Tree) -> None:
    link = tree.base / "ws_link"
    link.symlink_to(tree.ws)
    engine = Engine(default_snapshot("developer"), str(link / "."))
    assert (engine.root, engine.root_real) == (str(link), str(tree.ws))
    assert tuple(engine.check_path("src/a.py", "write"))[:2] == ("allow", "path.in_scope")
    assert tuple(engine.check_path(f"{link}/src/a.py", "read"))[:2] == ("allow", "path.read")
    assert tuple(engine.check_path("cfg", "write"))[:2] == ("deny", "path.control")


def test_tier_reasons_name_the_preset_and_the_mode(tree: Tree) -> None:
    plain, contained = tree.engine(), tree.engine(contained=True)
    assert tuple(plain.check_line("ls")) == (
        "allow", "preset.developer.allow", "matches 'ls' in the developer preset", None,
    )  # fmt: skip
    assert tuple(contained.check_line("ls"))[2] == (
        "matches 'ls' in the developer preset (contained)"
    )
    assert tuple(contained.tier(["ls"], tool=True))[2] == "matches 'ls' in the developer preset"
    config = tree.engine(allow=("make lint",), ask=("make x",), deny=("make clean",))
    assert tuple(config.check_line("make lint"))[:3] == (
        "allow", "config.allow", "matches 'make lint' in keel.toml [policy]",
    )  # fmt: skip
    assert tuple(config.check_line("make x"))[:2] == ("ask", "config.ask")
    assert tuple(config.check_line("make clean"))[:2] == ("deny", "config.deny")


def test_the_contained_allow_list_applies_to_contained_commands_only(tree: Tree) -> None:
    plain, contained = tree.engine(), tree.engine(contained=True)
    assert tuple(contained.check_line("python x.py")) == (
        "allow", "preset.developer.allow", "matches 'python' in the developer preset (contained)",
        None,
    )  # fmt: skip
    assert tuple(plain.check_line("python x.py"))[:2] == ("ask", "default.ask")
    # a client tool never runs in the sandbox: the contained list never allows it
    assert tuple(contained.tier(["python"], tool=True))[:2] == ("ask", "default.ask")
    preset = contained.explain()["commands"]["preset"]["allow"]
    assert "python" in preset and "python" not in plain.explain()["commands"]["preset"]["allow"]


def test_each_preset_keeps_its_own_tiers(tree: Tree) -> None:
    tiers = {
        (p, c): tree.engine(p, contained=c).explain()["commands"]["preset"]
        for p in ("developer", "strict", "readonly")
        for c in (False, True)
    }
    assert "pytest" in tiers[("developer", False)]["allow"]
    assert "pytest" not in tiers[("strict", False)]["allow"]
    assert tiers[("strict", False)]["deny"] and not tiers[("readonly", False)]["deny"]
    assert tiers[("readonly", False)]["ask"] == tiers[("strict", False)]["deny"]
    assert tiers[("developer", True)] != tiers[("developer", False)]
    assert tiers[("strict", True)] == tiers[("strict", False)]
