"""Path canonicalisation and glob matching, standard library only.

A path is judged in every form an attacker could mean: as given, percent-, ``%u``- and
HTML-decoded (repeatedly), with backslashes as separators, with ``;params`` stripped, NFKC
normalised; each form lexically normalised and with symlinks resolved. A path is inside the
workspace only if every form is; the strictest verdict over the forms wins.
"""

from __future__ import annotations

import os
import re

DEVICES_WRITE = frozenset(
    {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/1", "/dev/fd/2"}
)
DEVICES_READ = DEVICES_WRITE | {
    "/dev/zero",
    "/dev/stdin",
    "/dev/urandom",
    "/dev/random",
    "/dev/fd/0",
}

# Patterns are compiled on first use (re caches them).
_PCT = rb"%([0-9a-fA-F]{2})"
_PCT_U = r"%[uU]([0-9a-fA-F]{4})"  # IIS-style; servers read it in either case
_PARAMS = r";[^/\\]*"
_DRIVE = r"^(?:[A-Za-z]:|\\\\|//[^/])"
_OVERLONG = (
    (b"\xc0\xae", b"."),
    (b"\xc0\xaf", b"/"),
    (b"\xc1\x9c", b"\\"),
    (b"\xc0\x2e", b"."),
    (b"\xe0\x80\xae", b"."),
    (b"\xe0\x80\xaf", b"/"),
    (b"\xf0\x80\x80\xae", b"."),
    (b"\xf0\x80\x80\xaf", b"/"),
    (b"\xc0\x5c", b"\\"),
    (b"\xc0\x2f", b"/"),
)
_HEX = r"(?i)0x(2e|2f|5c)"
# Characters that render as a dot, slash or backslash; some servers fold them.
_LOOKALIKE = str.maketrans(
    {
        "\u2215": "/",
        "\u2044": "/",
        "\u29f8": "/",
        "\uff0f": "/",
        "\u2216": "\\",
        "\u29f5": "\\",
        "\uff3c": "\\",
        "\uff0e": ".",
        "\u2024": ".",
        "\uefc8": "/",
        "\uf025": "/",
    }
)


def _decode_once(text: str) -> str:
    if "&" in text and ";" in text:
        import html

        text = html.unescape(text)
    if "%u" in text or "%U" in text:
        text = re.sub(_PCT_U, lambda m: chr(int(m.group(1), 16)), text)
    if "0x" in text or "0X" in text:
        text = re.sub(_HEX, lambda m: chr(int(m.group(1), 16)), text)
    if "%" in text:
        raw = re.sub(
            _PCT, lambda m: bytes((int(m.group(1), 16),)), text.encode("utf-8", "surrogatepass")
        )
        for bad, good in _OVERLONG:
            raw = raw.replace(bad, good)
        text = raw.decode("utf-8", "replace")
    return text


def decodings(text: str) -> list[str]:
    """``text`` and each successive decoding of it, until it stops changing (at most 8)."""
    out = [text]
    for _ in range(8):
        nxt = _decode_once(out[-1])
        if nxt == out[-1]:
            break
        out.append(nxt)
    return out


def variants(text: str) -> list[str]:
    """Every form of ``text`` worth judging (decoded, backslash, params, NFKC, ``file:`` URL)."""
    forms: list[str] = []
    for d in [*decodings(text), *_file_url(text)]:
        for v in (d, d.replace("\\", "/")):
            for w in (v, re.sub(_PARAMS, "", v) if ";" in v else v):
                if w not in forms:
                    forms.append(w)
    if not all(f.isascii() for f in forms):
        import unicodedata

        for f in list(forms):
            n = unicodedata.normalize("NFKC", f.translate(_LOOKALIKE))
            for m in (n, n.replace("\\", "/")):
                if m not in forms:
                    forms.append(m)
    return forms


def _file_url(text: str) -> list[str]:
    """The path of a ``file:`` URL (``file:///etc/passwd``, ``file://localhost/x``), decoded."""
    if text[:5].lower() != "file:":
        return []
    rest = text[5:]
    if rest.startswith("//"):
        rest = rest[2:]
        host, slash, path = rest.partition("/")
        rest = slash + path if host.lower() in ("", "localhost") else "//" + rest
    return decodings(rest)


def expand_home(path: str, home: str) -> str:
    """``~``, ``~user``, ``$HOME`` and ``${HOME}`` at the start of ``path``."""
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    if path.startswith("~"):
        return os.path.expanduser(path)
    for var in ("$HOME", "${HOME}"):
        if path == var or path.startswith(var + "/"):
            return home + path[len(var) :]
    return path


def is_foreign_absolute(path: str) -> bool:
    """A Windows drive or UNC path: never inside a POSIX workspace."""
    return bool(re.match(_DRIVE, path))


def absolute_forms(path: str, cwd: str) -> tuple[str, str]:
    """The lexically normalised absolute path and its symlink-resolved form."""
    full = path if path.startswith("/") else os.path.join(cwd, path)
    lexical = os.path.normpath(full)
    if lexical.startswith("//"):
        lexical = "/" + lexical.lstrip("/")
    return lexical, os.path.realpath(lexical if ".." not in full else full)


def inside(path: str, root: str) -> bool:
    """True if ``path`` is ``root`` or below it (both absolute, normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` (``.`` for the root itself); assumes ``inside``."""
    if path == root:
        return "."
    return path[len(root.rstrip("/")) + 1 :]


def glob_to_regex(glob: str, *, anchored_any_depth: bool = True) -> str:
    """Translate a gitignore-style glob to a regular expression source.

    ``**`` spans directories, ``*`` and ``?`` stay in one segment, a glob with no ``/``
    matches at any depth, and ``dir/**`` also matches ``dir`` itself.
    """
    g = glob.strip()
    if g.startswith("/"):
        g = g.lstrip("/")
    elif anchored_any_depth and "/" not in g.rstrip("/") and g.rstrip("/") != "**":
        # ``**.pem`` has no ``**`` segment: like ``*.pem``, it matches at any depth.
        g = "**/" + g
    g = g.rstrip("/") or "**"
    segs: list[str] = []
    for seg in g.split("/"):
        if not (seg == "**" and segs and segs[-1] == "**"):
            segs.append(seg)
    out = ""
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        if seg == "**":
            if last:
                out = out[:-1] + "(?:/.*)?" if out else ".*"
            else:
                out += "(?:.*/)?"
            continue
        out += _segment(seg) + ("" if last else "/")
    return out


def _segment(seg: str) -> str:
    out, i = "", 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            start = i + 2 if seg[i + 1 : i + 2] == "!" else i + 1
            j = seg.find("]", start + 1 if seg[start : start + 1] == "]" else start)  # as fnmatch
            if j < 0:
                out += re.escape(c)
            else:
                body = seg[i + 1 : j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out += f"[{body}]"
                i = j
        else:
            out += re.escape(c)
        i += 1
    return out


class GlobSet:
    """Several globs compiled lazily into one regular expression; remembers which matched."""

    __slots__ = ("_globs", "_ignore_case", "_regex", "_sources")

    def __init__(self, globs: tuple[str, ...], *, ignore_case: bool = False) -> None:
        self._globs = globs
        self._ignore_case = ignore_case
        self._regex: re.Pattern[str] | None = None
        self._sources: list[str] = []

    @property
    def globs(self) -> tuple[str, ...]:
        """The globs, as given."""
        return self._globs

    def match(self, path: str) -> str | None:
        """The first glob matching ``path`` (slash-free at the start), or ``None``."""
        if not self._globs:
            return None
        if self._regex is None:
            self._sources = [glob_to_regex(g) for g in self._globs]
            flags = re.DOTALL | (re.IGNORECASE if self._ignore_case else 0)
            self._regex = re.compile(
                "|".join(f"(?P<g{i}>{s})" for i, s in enumerate(self._sources)), flags
            )
        m = self._regex.fullmatch(path)
        if m is None:
            return None
        for name, value in m.groupdict().items():
            if value is not None:
                return self._globs[int(name[1:])]
        return self._globs[0]
