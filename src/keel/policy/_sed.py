"""What a GNU sed script reads, writes and runs, read the way sed reads it.

``sed_script`` follows sed's grammar (addresses, commands, ``s`` flags, file names to the end
of the line) and reports the files the script reads and writes and whether it executes
anything (``e``); a script it cannot read is reported as such, never as harmless.

A leaf: it imports nothing else of the policy. Standard library only: this is on the hook path.
"""

from __future__ import annotations

from keel.core.frozen import Frozen


class SedScript(Frozen):
    """What a sed script does beyond editing the stream."""

    __slots__ = ("executes", "reads", "understood", "writes")
    reads: tuple[str, ...]
    """Files named by ``r`` and ``R``."""
    writes: tuple[str, ...]
    """Files named by ``w``, ``W`` and the ``w`` flag of ``s``."""
    executes: bool
    """An ``e`` command or the ``e`` flag of ``s``: runs a shell command."""
    understood: bool
    """False when the script could not be read to the end (then nothing above is certain)."""

    def __init__(
        self, reads: tuple[str, ...], writes: tuple[str, ...], executes: bool, understood: bool
    ) -> None:
        """The facts of one script; build them with ``sed_script``."""
        self._init(reads=reads, writes=writes, executes=executes, understood=understood)


_SED_SIMPLE = frozenset("=dDgGhHxnNpPzF{}")
_SED_LABEL = frozenset("btT:")
_SED_NUMBER = frozenset("qQlLv")


def sed_script(script: str) -> SedScript:
    """The files ``script`` reads and writes and whether it executes commands."""
    reader = _SedReader(script)
    try:
        reader.run()
    except (IndexError, ValueError):
        reader.understood = False
    return SedScript(tuple(reader.reads), tuple(reader.writes), reader.executes, reader.understood)


class _SedReader:
    """One pass over a sed script, command by command."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.reads: list[str] = []
        self.writes: list[str] = []
        self.executes = False
        self.understood = True

    def run(self) -> None:
        while self._skip(" \t\n;"):
            if self.s[self.i] == "#":
                self._rest_of_line()
                continue
            self._address()
            if not self._skip(" \t!"):
                raise ValueError("an address without a command")
            self._command()

    def _skip(self, chars: str) -> bool:
        """Skip ``chars``; True if the script goes on."""
        while self.i < len(self.s) and self.s[self.i] in chars:
            self.i += 1
        return self.i < len(self.s)

    def _rest_of_line(self) -> str:
        end = self.s.find("\n", self.i)
        end = len(self.s) if end < 0 else end
        text, self.i = self.s[self.i : end], end
        return text.strip()

    def _file_name(self) -> str:
        name = self._rest_of_line()
        if not name:
            raise ValueError("a file command without a file name")
        return name

    def _address(self) -> None:
        if not self._one_address(first=True):
            return
        self._skip(" \t")
        if self.i < len(self.s) and self.s[self.i] == ",":
            self.i += 1
            self._skip(" \t")
            if not self._one_address(first=False):
                raise ValueError("missing second address")

    def _one_address(self, *, first: bool) -> bool:
        s, start = self.s, self.i
        if self.i >= len(s):
            return False
        c = s[self.i]
        if c == "$":
            self.i += 1
        elif c.isdigit() or (not first and c in "+~"):
            self.i += 1
            while self.i < len(s) and (s[self.i].isdigit() or s[self.i] == "~"):
                self.i += 1
        elif c in "/\\":
            if c == "\\":
                self.i += 1
            self._delimited(s[self.i])
            while self.i < len(s) and s[self.i] in "IM":
                self.i += 1
        return self.i > start

    def _delimited(self, delimiter: str) -> str:
        """Skip ``<d>text<d>`` starting at the opening delimiter; return the text."""
        if delimiter in "\n\\":
            raise ValueError("bad delimiter")
        self.i += 1
        start = self.i
        while self.s[self.i] != delimiter:
            self.i += 2 if self.s[self.i] == "\\" else 1
        text = self.s[start : self.i]
        self.i += 1
        return text

    def _command(self) -> None:
        c = self.s[self.i]
        self.i += 1
        if c in _SED_SIMPLE:
            return
        if c in "aic":
            self._text()
        elif c in "rR":
            self.reads.append(self._file_name())
        elif c in "wW":
            self.writes.append(self._file_name())
        elif c == "e":
            self.executes = True
            self._rest_of_line()
        elif c == "s":
            self._substitute()
        elif c == "y":
            delimiter = self.s[self.i]
            self._delimited(delimiter)
            self.i -= 1
            self._delimited(delimiter)
        elif c in _SED_LABEL:
            while self.i < len(self.s) and self.s[self.i] not in ";\n":
                self.i += 1
        elif c in _SED_NUMBER:
            self._skip(" \t0123456789.")
        else:
            raise ValueError(f"unknown sed command {c!r}")

    def _text(self) -> None:
        """``a text``, or ``a`` and a backslash, with continuation lines ending in one."""
        while True:
            line = self._rest_of_line()
            if not line.endswith("\\") or self.i >= len(self.s):
                return
            self.i += 1

    def _substitute(self) -> None:
        delimiter = self.s[self.i]
        self._delimited(delimiter)
        self.i -= 1
        self._delimited(delimiter)
        while self.i < len(self.s) and self.s[self.i] in "gpiImMe0123456789w":
            flag = self.s[self.i]
            self.i += 1
            if flag == "e":
                self.executes = True
            elif flag == "w":
                self.writes.append(self._file_name())
                return
        if self.i < len(self.s) and self.s[self.i] not in " \t\n;}#":
            raise ValueError("bad s flags")
