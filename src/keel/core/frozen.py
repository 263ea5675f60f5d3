"""``Frozen``: the base of keel's hot-path values, without importing ``dataclasses``.

``dataclasses`` costs about 13 ms to import (it pulls in ``inspect``), more than the
interpreter's own start, and the values every hook call builds (``ToolCall``, ``Decision``)
need none of its machinery. A ``Frozen`` subclass lists its fields in ``__slots__``, sets
them in ``__init__`` with ``_init``, and gets value equality, hashing, ``repr``, ``replace``
and immutability (assigning a field raises ``AttributeError``) from here.

Nothing is imported at run time, not even ``__future__`` (annotations that name a type only
imported for pyright are quoted): this runs on every hook call.
"""

TYPE_CHECKING = False  # typing costs ~9 ms to import on the hook path
if TYPE_CHECKING:
    from typing import Self


class Frozen:
    """An immutable value compared by its fields (the ``__slots__`` of its class)."""

    __slots__ = ()

    def _init(self, *values: object, **fields: object) -> None:
        """Set every field (for ``__init__``): by name, or positionally in ``__slots__`` order.

        Prefer names: a linter that sorts ``__slots__`` cannot then swap two fields.
        """
        if values:
            fields = dict(zip(self.__slots__, values, strict=True))
        missing = set(self.__slots__) - set(fields)
        if missing or len(fields) != len(self.__slots__):
            raise TypeError(f"{type(self).__name__} fields not set right: {sorted(missing)}")
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        """Refuse: the value is frozen."""
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        """Refuse: the value is frozen."""
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def __eq__(self, other: object) -> bool:
        """Equal to a value of the same class with equal fields."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # pyright: ignore[reportAttributeAccessIssue]

    def __hash__(self) -> int:
        """The hash of the fields (a field that is not hashable makes the value unhashable)."""
        return hash(self._values())

    def __repr__(self) -> str:
        """``Class(field=value, ...)``."""
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[object, ...]:
        """Copy and pickle through the fields."""
        return (_rebuild, (type(self), self._values()))

    def replace(self, **changes: object) -> "Self":
        """A copy with ``changes`` applied to the named fields."""
        unknown = set(changes) - set(self.__slots__)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        new = object.__new__(type(self))
        for name in self.__slots__:
            object.__setattr__(new, name, changes.get(name, getattr(self, name)))
        return new


def _rebuild(cls: type, values: tuple[object, ...]) -> object:
    new = object.__new__(cls)
    for name, value in zip(cls.__slots__, values, strict=True):
        object.__setattr__(new, name, value)
    return new
