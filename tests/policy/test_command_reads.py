# ruff: noqa: E501  (tables: one command line, with what it must give, per row)
"""The files one command reads, and which of its arguments are patterns, not files."""

from __future__ import annotations

import pytest
from policy_helpers import split

from keel.policy._rules import pattern_args, reads

PATTERNS: list[tuple[str, list[int]]] = [
    ('grep -rn .env src', [1]),
    ('grep -e a -e b f', [1, 3]),
    ('grep --regexp a f', [1]),
    ('grep -f pats f', []),
    ('grep --file pats f', []),
    ('grep -m 1 -A 2 -B 3 -C 4 -d skip -D skip --max-count 1 --context 2 --label l pat f', [18]),
    ('grep -x pat', [1]),
    ('grep - f', [0]),
    ('grep -i', []),
    ('egrep -m 1 p f', [2]),
    ('fgrep -m 1 p f', [2]),
    ('zgrep -m 1 p f', [2]),
    ('rg -m 1 -A 1 -B 1 -C 1 -g g -t py -T js -j 2 -M 9 -E e -r r -d 1 p f', [24]),
    ('rg --type py --type-not js --glob g --iglob g --max-count 1 --context 1 --threads 1 --max-columns 1 --encoding e --replace r --sort s --sortr s --ignore-file f --max-depth 1 --pre p --pre-glob g pat f', [32]),
    ('ag -m 1 p f', [2]),
    ('ack -e p f', [1]),
    ('awk -v a=1 -F , -f x prog f', []),
    ('awk -v a=1 -F , prog f', [4]),
    ('gawk -v a=1 prog', [2]),
    ('mawk -F : prog', [2]),
    ('sed -l 5 s/a/b/ f', [2]),
    ('sed -n p f', [1]),
    ('jq --indent 2 -L l .x f', [4]),
    ('jq --arg a b .x f', [3]),
    ('jq --argjson a b .x f', [3]),
    ('jq --slurpfile a b .x f', [3]),
    ('jq --rawfile a b .x f', [3]),
    ('find . -name a -iname b -path c -ipath d -regex e -iregex f -wholename g -lname h -type f', [2, 4, 6, 8, 10, 12, 14, 16]),
    ('find . -name', []),
    ('git grep -m 1 -A 1 -B 1 -C 1 --max-depth 1 --threads 1 --max-count 1 pat', [15]),
    ('git -C x grep pat', [3]),
    ('git grep -e p', [2]),
    ('git commit -m msg --message m2 -F f', [2, 4]),
    ('git log --grep g --author a --committer c -S s -G g --format f --pretty p', [2, 4, 6, 8, 10, 12, 14]),
    ('git log --grep=g --author=a --committer=c --format=f --pretty=p --message=m -S=s -G=g', [1, 2, 3, 4, 5, 6, 7, 8]),
    ('git log -m', []),
    ('cat a', []),
]  # fmt: skip


@pytest.mark.parametrize(("line", "expected"), PATTERNS)
def test_pattern_args(line: str, expected: list[int]) -> None:
    name, args = split(line)
    assert sorted(pattern_args(name, args)) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # `-e`/`--regexp` given after the operands, and more than once.
        ("grep -r src -e TODO", [3]), ("grep --regexp a --regexp b f", [1, 3]),
    ],
)  # fmt: skip
def test_pattern_args_after_operands(line: str, expected: list[int]) -> None:
    name, args = split(line)
    assert sorted(pattern_args(name, args)) == expected


READS: list[tuple[str, list[str | None]]] = [
    ('grep pat a b', ['a', 'b']),
    ('grep -e pat a', ['a']),
    ('grep -f pats a', ['pats', 'a']),
    ('grep --file pats a', ['pats', 'a']),
    ('grep --regexp p a', ['a']),
    ('grep -m 1 pat a', ['a']),
    ('rg -g x pat a', ['a']),
    ('awk -f p.awk a', ['p.awk', 'a']),
    ('awk prog a', ['a']),
    ('sed -e s/a/b/ a', ['a']),
    ('sed -f s.sed a', ['s.sed', 'a']),
    ('sed s/a/b/ a', ['a']),
    ('jq .x a', ['a']),
    ('cat -n a b', ['a', 'b']),
    ('head -n 5 -c 3 a', ['a']),
    ('tail -n 1 -c 2 -s 3 a', ['a']),
    ('less -b 1 -h 1 -j 1 -p x -P y -x 1 -y 1 -z 1 -D d a', ['a']),
    ('more -n 1 a', ['a']),
    ('sort -o o -t , -S 1 -T t -k 1 a', ['a']),
    ('uniq -f 1 -s 1 -w 1 a', ['a']),
    ('cut -b 1 -c 1 -d , -f 1 a', ['a']),
    ('nl -b a -d x -f f -h h -i 1 -l 1 -n ln -s s -v 1 -w 1 a', ['a']),
    ('tac -s x a', ['a']),
    ('xxd -c 1 -g 1 -l 1 -s 1 -o 1 -n n a', ['a']),
    ('od -A x -j 1 -N 1 -S 1 -t x -w 1 a', ['a']),
    ('hexdump -e f -n 1 -s 1 a', ['a']),
    ('strings -n 1 -t x -e s a', ['a']),
    ('scp -P 1 -o o -c c -l 1 a b', ['a', 'b']),
    ('unzip -P pw a', ['a']),
    ('wc -c a', ['a']),
    ('ls -la', []),
    ('echo a', []),
]  # fmt: skip


@pytest.mark.parametrize(("line", "expected"), READS)
def test_reads(line: str, expected: list[str | None]) -> None:
    name, args = split(line)
    assert reads(name, args) == expected
