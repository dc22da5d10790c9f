"""A small immutable value type with named, keyword-only fields.

It does what `dataclasses.dataclass(frozen=True, kw_only=True, slots=True)` does for envbuild's value
types, without its start-up cost: importing dataclasses (which imports inspect) and creating the ~20
classes `envbuild resolve` loads cost about 26 ms here, more than the whole resolve, and start-up time
is a feature of that command. Fields are the class's `__slots__`; every one must be given by name, so
two values of one type can never be swapped by position.
"""

from __future__ import annotations

TYPE_CHECKING = False


# each Record type's field names as a set, so the check that every field was given is one C-level
# comparison: loading a catalogue of hundreds of GPU rows builds thousands of records (issue 34 item 9)
_FIELDS: dict[type, frozenset[str]] = {}


class Record:
    __slots__: tuple[str, ...] = ()

    def __init__(self, **values: object) -> None:
        names = self.__slots__
        fields = _FIELDS.get(type(self))
        if fields is None:
            fields = _FIELDS[type(self)] = frozenset(names)
        if values.keys() != fields:
            missing = [n for n in names if n not in values]
            unknown = [n for n in values if n not in names]
            raise TypeError(
                f"{type(self).__name__}() needs every field by name: "
                + "; ".join(
                    part
                    for part in (
                        f"missing {', '.join(missing)}" if missing else "",
                        f"unknown {', '.join(unknown)}" if unknown else "",
                    )
                    if part
                )
            )
        assign = object.__setattr__
        for name in names:
            assign(self, name, values[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def replace(self, **changes: object) -> Record:
        """A copy with some fields changed (dataclasses.replace)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values.update(changes)
        return type(self)(**values)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"
