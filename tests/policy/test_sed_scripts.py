"""The scripts ``sed`` runs (``-e``, ``--expression``, the first operand), in every spelling."""

from __future__ import annotations

import pytest
from policy_helpers import argv

from keel.policy._rules import sed_scripts


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("sed -e s/a/b/ -e p f", ["s/a/b/", "p"]), ("sed --expression s/x/y/ f", ["s/x/y/"]),
        ("sed --expression=p f", ["p"]), ("sed -es/a/b/ f", ["s/a/b/"]), ("sed -e", [None]),
        ("sed -f script f", []), ("sed --file script f", []), ("sed -n p f", ["p"]),
        ("sed -l 3 p f", ["p"]), ("sed -n $X f", [None]), ("sed --e x", ["x"]),
    ],
)  # fmt: skip
def test_sed_scripts(line: str, expected: list[str | None]) -> None:
    assert sed_scripts(argv(line)[1:]) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("sed a.txt -e p", ["p"]), ("sed --expression=s/a=b/ f", ["s/a=b/"]), ("sed -ep f", ["p"]),
        ("sed -n f --expression p", ["p"]),
    ],
)  # fmt: skip
def test_sed_scripts_in_every_spelling(line: str, expected: list[str | None]) -> None:
    assert sed_scripts(argv(line)[1:]) == expected
