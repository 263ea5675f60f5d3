"""The code an interpreter runs from the command line or standard input (one-liners).

``python -c``, ``perl -e``, ``node -p``, ``awk PROGRAM`` and the rest, and a bare interpreter
fed a here-doc: the code is judged like a script. Which interpreters read their script from
standard input.
"""

from __future__ import annotations

import pytest
from policy_helpers import split

from keel.policy._rules import interpreter_code, reads_stdin_script


@pytest.mark.parametrize(
    ("line", "heredoc", "expected"),
    [
        ("awk -F , {print} f", None, ("awk", "{print}")),
        ("gawk -v a=1 -f p.awk", None, None),
        ("mawk {print}", None, ("awk", "{print}")),
        ("nawk {x}", None, ("awk", "{x}")),
        ("awk", None, None),
        ("python -c CODE", None, ("python", "CODE")),
        ("python -Bc CODE", None, ("python", "CODE")),
        ("python -c", None, ("python", None)),
        ("python -c $X", None, ("python", None)),
        ("python x.py -c CODE", None, None),
        ("python $X -c CODE", None, ("python", "CODE")),
        ("pypy -c CODE", None, ("python", "CODE")),
        ("pypy3 -c CODE", None, ("python", "CODE")),
        ("perl -e CODE", None, ("perl", "CODE")),
        ("perl -E CODE", None, ("perl", "CODE")),
        ("perl -n f", None, None),
        ("ruby -e CODE", None, ("ruby", "CODE")),
        ("node -e CODE", None, ("node", "CODE")),
        ("node -p CODE", None, ("node", "CODE")),
        ("node --eval CODE", None, ("node", "CODE")),
        ("node --print CODE", None, ("node", "CODE")),
        ("nodejs -e CODE", None, ("node", "CODE")),
        ("php -r CODE", None, ("php", "CODE")),
        ("lua -e CODE", None, ("lua", "CODE")),
        ("luajit -e CODE", None, ("lua", "CODE")),
        ("bun -e CODE", None, ("node", "CODE")),
        ("deno --eval CODE", None, ("deno", "CODE")),
        ("deno -e CODE", None, None),
        ("ls -c CODE", None, None),
        ("python", "print(1)", ("python", "print(1)")),
        ("python -", "print(1)", ("python", "print(1)")),
        ("python -u", "print(1)", None),
        ("python x.py", "print(1)", None),
        ("python", None, None),
        ("ruby", "puts 1", None),
    ],
)
def test_interpreter_code(
    line: str, heredoc: str | None, expected: tuple[str, str | None] | None
) -> None:
    name, args = split(line)
    assert interpreter_code(name, args, heredoc) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("bash", True), ("bash -", True), ("bash -s x", True), ("bash x.sh", False),
        ("sh -c x", False), ("python", True), ("python -", True), ("python x.py", False),
        ("python -s x.py", False), ("ls", False), ("cat -", False),
    ],
)  # fmt: skip
def test_reads_stdin_script(line: str, expected: bool) -> None:
    name, args = split(line)
    assert reads_stdin_script(name, args) is expected
