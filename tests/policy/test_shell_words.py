"""How the parse reads each word: quoting, escapes, variables, ``~``, brace expansion.

Arithmetic, subscripts and declarations that evaluate text are issues the policy asks about;
``fast_split`` splits only lines that need no shell.
"""

from __future__ import annotations

import pytest
from shell_facts import Case, facts

from keel.policy._shell import expand_braces, fast_split, subscript_is_safe

# Words: quoting, escapes, variables, tilde, braces; arithmetic and declarations that evaluate.
WORDS: list[Case] = [
    ("echo 'a b' \"c d\" $'e\\tf' $\"g\"", ["echo 'a b' 'c d' e\tf g | fails"], []),
    ("echo $'\\x72\\x6d' $'\\u00e9' $'\\N' $'\\xZZ'", ["echo rm é ? ? | fails"], []),
    ('echo "a\\"b\\$c\\\\d\\`e\\q"', ['echo a"b$c\\d`e\\q | fails'], []),
    ('echo "x$(a)y"', ["a", "echo ? | subs=a | fails"], []),
    (
        'echo "$HOME" "${HOME}" "$PWD" $PWD ${HOME:-/x} ${#HOME}',
        ["echo /h /h /w /w ? ? | fails"],
        [],
    ),
    ("echo a\"b\"'c'$d", ["echo ? | fails"], []),
    ("echo a\"b\"'c'", ["echo abc | fails"], []),
    ('echo ~/a"b" x~/c', ["echo ~/ab x~/c | fails"], []),
    ('echo "~/a"', ["echo ~/a | fails"], []),
    ("echo 12 -3", ["echo 12 -3 | fails"], []),
    (
        "echo a\\ b c\\\\d",
        ["echo 'a b' c\\d | fails"],
        [("obfuscated", "'c\\\\\\\\d' escapes ordinary characters")],
    ),
    ("r\\m -rf x", ["rm -rf x | fails"], [("obfuscated", "'r\\\\m' escapes ordinary characters")]),
    ("\\rm x", ["rm x | fails"], [("obfuscated", "'\\\\rm' escapes ordinary characters")]),
    (
        "echo $API_TOKEN ${DB_PASSWORD} $my_secret $Private_Key $accesskey $credentials",
        ["echo ? ? ? ? ? ? | fails"],
        [
            ("secret_env", "expands $API_TOKEN, which looks like a credential"),
            ("secret_env", "expands $DB_PASSWORD, which looks like a credential"),
            ("secret_env", "expands $my_secret, which looks like a credential"),
            ("secret_env", "expands $Private_Key, which looks like a credential"),
            ("secret_env", "expands $accesskey, which looks like a credential"),
            ("secret_env", "expands $credentials, which looks like a credential"),
        ],
    ),
    ("API_TOKEN=x; echo $API_TOKEN", ["echo x | fails"], []),
    (
        "echo ${a[$(id)]} ${b[1]} ${c[@]} ${d[*]} ${e[x]}",
        ["id", "id", "echo ? ? ? ? ? | subs=id,id | fails"],
        [("arithmetic", "arithmetic evaluates $x, whose value is not a known number")],
    ),
    (
        "echo ${a[$x]}",
        ["echo ? | fails"],
        [("arithmetic", "arithmetic evaluates $x, whose value is not a known number")],
    ),
    (
        "echo $((1+2)) $((x)) $((RANDOM%2)) $(( $(id) ))",
        ["id", "echo ? ? ? ? | subs=id | fails"],
        [("arithmetic", "arithmetic evaluates $x, whose value is not a known number")],
    ),
    ("n=5; echo $((n+1))", ["echo ? | fails"], []),
    (
        "n=abc; echo $((n))",
        ["echo ? | fails"],
        [("arithmetic", "arithmetic evaluates $n, whose value is not a known number")],
    ),
    ("n=0x1F; echo $((n)) $((LINENO))", ["echo ? ? | fails"], []),
    (
        "(( x = y ))",
        [],
        [
            ("arithmetic", "arithmetic evaluates $y, whose value is not a known number"),
            ("arithmetic", "arithmetic evaluates $x, whose value is not a known number"),
        ],
    ),
    ("(( 1 + 2 ))", [], []),
    ('(( "3" ))', [], []),
    ('(( "a" ))', [], [("arithmetic", "arithmetic evaluates the text '\"a\"'")]),
    ("(( 'b' ))", [], [("arithmetic", "arithmetic evaluates the text \"'b'\"")]),
    ("for ((i=0; i<3; i++)); do a $i; done", ["a 0"], []),
    (
        "for ((i=0; i<n; i++)); do a; done",
        ["a"],
        [("arithmetic", "arithmetic evaluates $n, whose value is not a known number")],
    ),
    (
        "for ((i=$(id); i<1; i++)); do a; done",
        ["id", "id", "a"],
        [
            ("arithmetic", "arithmetic evaluates $i, whose value is not a known number"),
            ("arithmetic", "arithmetic evaluates $i, whose value is not a known number"),
        ],
    ),
    (
        "[[ $x -eq 1 ]]",
        [],
        [("arithmetic", "arithmetic evaluates $x, whose value is not a known number")],
    ),
    ("[[ 1 -lt 2 ]]", [], []),
    ("[[ $(id) -gt 1 ]]", ["id"], []),
    ("[[ a == b ]]", [], []),
    (
        "[[ -v a[$(id)] ]]",
        ["id", "id"],
        [("arithmetic", "[[ -v ]] evaluates the subscript of its operand")],
    ),
    ("[[ -v a[1] ]]", [], []),
    ("[[ -v a ]]", [], []),
    ("[[ -v $x ]]", [], [("arithmetic", "[[ -v ]] evaluates the subscript of its operand")]),
    ("[[ -n $x ]] && a", ["a | fails"], []),
    (
        "[ $x -eq 1 ]",
        [],
        [("arithmetic", "arithmetic evaluates $x, whose value is not a known number")],
    ),
    ("test $x -eq 1", ["test ? -eq 1 | fails"], []),
    ("declare -i n=5", ["declare -i n=5 | fails"], []),
    ("declare -i n=abc", ["declare -i n=abc | fails"], []),
    (
        "declare -i n; n=7; n=x",
        [],
        [("arithmetic", "n is an integer variable: its value is evaluated")],
    ),
    ("declare -n r=x", ["declare -n r=x | fails"], []),
    ("declare -r n=abc", ["declare -r n=abc | fails"], []),
    ("local -ia m=q", ["local -ia m=q | fails"], []),
    ("export X=1 Y", ["export X=1 Y | fails"], []),
    ("export -n X", ["export -n X | fails"], []),
    ("declare x; echo $x", ["echo ? | fails"], []),
    (
        "declare -i y; echo $((y))",
        ["echo ? | fails"],
        [("arithmetic", "arithmetic evaluates $y, whose value is not a known number")],
    ),
    (
        'declare "a[$(id)]=1"',
        ["id"],
        [("arithmetic", "declares '?', whose subscript is evaluated")],
    ),
    (
        "declare 'a[1]=2' 'b[@]=3' 'c[x]=1'",
        [],
        [("arithmetic", "declares 'c[x]=1', whose subscript is evaluated")],
    ),
    ('declare "a[$x]=1"', [], [("arithmetic", "declares '?', whose subscript is evaluated")]),
    ("typeset -i q=1+1", ["typeset -i q=1+1 | fails"], []),
    (
        'unset a "b[$(id)]" -v c',
        ["id"],
        [("arithmetic", "declares '?', whose subscript is evaluated")],
    ),
    ("unset -f f", ["unset -f f | fails"], []),
    ("unset 'd[1]'", [], []),
    ("a[$(id)]=1", ["id"], []),
    ("a[2]=x; echo $a", ["echo x | fails"], []),
    ("a[i]=x", [], [("arithmetic", "arithmetic evaluates $i, whose value is not a known number")]),
    ("LD_PRELOAD=/x.so a", ["a | set=LD_PRELOAD=/x.so | fails"], []),
    ("export LD_PRELOAD=/x.so", ["export LD_PRELOAD=/x.so | fails"], []),
    ("PATH=/tmp:$PATH a", ["a | set=PATH=? | fails"], []),
    ("X=$(id); LD_PRELOAD=$X a", ["id", "a | set=LD_PRELOAD=? | fails"], []),
    ("BASH_ENV=$y", [], [("env", "BASH_ENV")]),
    ("cat {a,b}", ["cat a b | fails"], []),
    ("cat x{1..3}", ["cat x1 x2 x3 | fails"], []),
    (
        "cat x{3..1} {a..c} {c..a} {01..3} {1..10..4} {-1..1} {a..e..2}",
        ["cat x3 x2 x1 a b c c b a 01 02 03 1 5 9 -1 0 1 a c e | fails"],
        [],
    ),
    ("cat {1..3..0}", ["cat 1 2 3 | fails"], []),
    ("cat \"{a,b}\" '{c,d}' \\{e,f}", ["cat {a,b} {c,d} {e,f} | fails"], []),
    ("cat {a,$x}", ["cat ? | fails"], []),
    ("cat {a}", ["cat {a} | fails"], []),
    ("cat {a,b", ["cat {a,b | fails"], []),
    ("cat ${x}{a,b}", ["cat ? | fails"], []),
    (
        "echo {1..300}",
        ["echo ? | fails"],
        [("unparseable", "brace expansion of '{1..300}' makes too many words")],
    ),
    (
        "echo {1..100}{1..3}",
        ["echo ? | fails"],
        [("unparseable", "brace expansion of '{1..100}{1..3}' makes too many words")],
    ),
    ("cat {a,b{c,d}}e", ["cat ae bce bde | fails"], []),
    ("cat {,a}", ["cat '' a | fails"], []),
    ("cat ~+{a,b} ~/{x,y}", ["cat ~+a ~+b ~/x ~/y | fails"], []),
    ("cat a{b\\,c,d}", ["cat ab,c ad | fails"], []),
    ("cat {a\\}b,c}", ["cat a}b c | fails"], []),
    ("cat $'{a,b}'", ["cat {a,b} | fails"], []),
    ("echo {x..y..-1}", ["echo x y | fails"], []),
    ("echo {-01..2}", ["echo -01 000 001 002 | fails"], []),
    ("declare -i n=abc;", [], [("arithmetic", "n is an integer variable: its value is evaluated")]),
    ("declare -n r=x;", [], [("arithmetic", "r is an integer variable: its value is evaluated")]),
    ("declare -r n=abc;", [], []),
    (
        "declare -i n=1; n=x",
        [],
        [("arithmetic", "n is an integer variable: its value is evaluated")],
    ),
    ("declare -r n=1; n=x", [], []),
    (
        "declare -i a[1]=2; a=x",
        [],
        [("arithmetic", "a is an integer variable: its value is evaluated")],
    ),
    ("declare -i n=5;", [], []),
    ("declare x-in n=abc;", [], []),
    ("declare x\\in;", [], [("obfuscated", "'x\\\\in' escapes ordinary characters")]),
    ("declare -\\in;", [], []),
    ("declare 'a=b[x]';", [], []),
    ("declare 'a=b[x]=1';", [], []),
    (
        "declare 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa[x]=1';",
        [],
        [
            (
                "arithmetic",
                "declares 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', whose subscript is evaluated",
            )
        ],
    ),
    ("unset -\\in x", [], []),
    ("echo '\udcff' \udcfe", ["echo \udcff \udcfe | fails"], []),
    ("a > {1..2}", ["a | redir=>{1..2} | fails"], []),
    ('echo "a"~+/x', ["echo a~+/x | fails"], []),
    ('echo ~+"/x"', ["echo /w/x | fails"], []),
    ('echo a""b', ["echo ab | fails"], []),
    ('x=; echo "a$x" $x', ["echo a '' | fails"], []),
    ('x=1; echo "a$x"', ["echo a1 | fails"], []),
    ("[[ a -nt b ]]", [], []),
    (
        "[[ -n $([[ $y -eq 1 ]]) ]]",
        [],
        [("arithmetic", "arithmetic evaluates $y, whose value is not a known number")],
    ),
    ("(( $'a' ))", [], [("arithmetic", "arithmetic evaluates the text \"'a'\"")]),
    (
        '(( "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" ))',
        [],
        [
            (
                "arithmetic",
                "arithmetic evaluates the text '\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'",
            )
        ],
    ),
    (
        "export LD_PRELOAD=" + "b" * 250 + ";",
        [],
        [
            (
                "env",
                "LD_PRELOAD=" + "b" * 189,
            )
        ],
    ),
    ("x=1; echo $x{a}", ["echo 1{a} | fails"], []),
    ("x=1; echo $x{a,b}", ["echo ? | fails"], []),
    ("x=1; echo $x{1..2}", ["echo ? | fails"], []),
    ("x=1; echo $x{a..b}", ["echo ? | fails"], []),
    ('echo {"a"}', ["echo {a} | fails"], []),
    ('echo "a"{b}', ["echo a{b} | fails"], []),
    (
        "echo {1..300}aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ["echo ? | fails"],
        [
            (
                "unparseable",
                "brace expansion of '{1..300}" + "a" * 32 + "' makes too many words",
            )
        ],
    ),
    ('echo "{"a,b', ["echo {a,b | fails"], []),
    (
        "[[ -n <([[ $y -eq 1 ]]) ]]",
        [],
        [("arithmetic", "arithmetic evaluates $y, whose value is not a known number")],
    ),
    ("a b=c=(d)", ["d", "a ? ? | fails"], [("unparseable", "cannot parse near 'b=c='")]),
    ("echo ${x:-token}", ["echo ? | fails"], []),
    ('echo "$" "a $"', ["echo $ 'a $' | fails"], []),
    # a substitution inside arithmetic does not end the check of the rest of it
    (
        "echo $(( x + $(a) ))",
        ["a", "echo ? | subs=a | fails"],
        [("arithmetic", "arithmetic evaluates $x, whose value is not a known number")],
    ),
    # $'..' text in arithmetic is evaluated like any other text
    ("[[ $'x' -eq 1 ]]", [], [("arithmetic", "arithmetic evaluates the text \"$'x'\"")]),
    # an element assignment sets the array's own name, cut at the first "["
    (
        "a[${b[1]}]=5; echo $a",
        ["echo 5 | fails"],
        [("arithmetic", "arithmetic evaluates $b, whose value is not a known number")],
    ),
    ("a[\\[]=5; echo $a", ["echo 5 | fails"], []),
    # a brace word tree-sitter split is reported as unparseable (the policy asks)
    ("cat {\\.env,x}", ["cat { .env,x} | fails"], [("unparseable", "cannot read the word at '{'")]),
]


@pytest.mark.parametrize(("line", "cmds", "issues"), WORDS)
def test_words(line: str, cmds: list[str], issues: list[tuple[str, str]]) -> None:
    assert facts(line) == (cmds, issues)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a{b,c}d", ["abd", "acd"]),
        ("${a,b}", ["${a,b}"]),
        ("\\{a,b}", ["\\{a,b}"]),
        ("x\\,{a,b}", ["x\\,a", "x\\,b"]),
        ("{a,{b,c}}", ["a", "b", "c"]),
        ("{a\\,b,c}", ["a\\,b", "c"]),
        ("{a,b}{1..2}", ["a1", "a2", "b1", "b2"]),
        ("{3..1}", ["3", "2", "1"]),
        ("{1..10..3}", ["1", "4", "7", "10"]),
        ("{10..1..3}", ["10", "7", "4", "1"]),
        ("{1..3..-1}", ["1", "2", "3"]),
        ("{a..e..2}", ["a", "c", "e"]),
        ("{e..a}", ["e", "d", "c", "b", "a"]),
        ("{05..7}", ["05", "06", "07"]),
        ("{-2..2}", ["-2", "-1", "0", "1", "2"]),
        ("{-05..-3}", ["-05", "-04", "-03"]),
        ("{1..1}", ["1"]),
        ("a{}b", ["a{}b"]),
        ("{,}", ["", ""]),
        ("{a,b", ["{a,b"]),
        ("a}b{c,d}", ["a}bc", "a}bd"]),
        ("{{a,b}}", ["{a}", "{b}"]),
        ("{1..2..}", ["{1..2..}"]),
        ("{1.5..2}", ["{1.5..2}"]),
        ("{aa..b}", ["{aa..b}"]),
        ("{1..a}", ["{1..a}"]),
        ("x{0..300}", None),
        ("{1..257}", None),
        ("{0..256}", None),
        ("{1..256}", [str(n) for n in range(1, 257)]),
        ("{A..C}", ["A", "B", "C"]),
        ("{a..a}", ["a"]),
        ("{-10..-05}", ["-10", "-09", "-08", "-07", "-06", "-05"]),
        ("{a,{b,c},d}", ["a", "b", "c", "d"]),
    ],
)
def test_expand_braces_is_bash_s(text: str, words: list[str] | None) -> None:
    assert expand_braces(text) == words


def test_expand_braces_stops_past_the_limit() -> None:
    assert expand_braces("{a,b}", 2) == ["a", "b"]
    assert expand_braces("{a,b,c}", 2) is None
    assert expand_braces("{a,b}{c,d}", 4) == ["ac", "ad", "bc", "bd"]
    assert expand_braces("{a,b}{c,d}", 3) is None
    assert expand_braces("{0..256}", 1000) == [str(n) for n in range(257)]
    assert expand_braces("{1..514..2}", 1000) == [str(n) for n in range(1, 514, 2)]


def test_an_escaped_character_in_braces_is_skipped_alone() -> None:
    assert expand_braces("{x\\a,b}") == ["x\\a", "b"]


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("a", True),
        ("a[1]", True),
        ("a[ 2 ]", True),
        ("a[-3]", True),
        ("a[+4]", True),
        ("a[0x1f]", True),
        ("a[@]", True),
        ("a[ * ]", True),
        ("a[i]", False),
        ("a[$(id)]", False),
        ("a[1", False),
        ("a[1][x]", False),
        ("a[x][1]", False),
        ("a[1 2]", False),
    ],
)
def test_subscript_is_safe(name: str, safe: bool) -> None:
    assert subscript_is_safe(name) is safe


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("a  b", ["a", "b"]),
        (" a", ["a"]),
        ("b a=1", ["b", "a=1"]),
        ("x,y:z@%+ -_./", ["x,y:z@%+", "-_./"]),
        ("a=1 b", None),
        ("if x", None),
        ("time x", None),
        ("{ x", None),
        ("a 'b'", None),
        ("a\tb", None),
        ("", None),
        ("  ", None),
    ],
)
def test_fast_split(line: str, words: list[str] | None) -> None:
    assert fast_split(line) == words
