"""matrix/requirements.toml: per framework build, the CUDA-family requirements its wheel's METADATA
declares for the extra the install uses, each row citing the wheel it was read from.

The framework files say which CUDA a build targets; these rows say what pip must be able to install
next to it (jax-cuda12-plugin 0.10.2 [with-cuda] needs nvidia-cuda-nvcc-cu12>=12.6.85), so the
rules in envbuild.resolve.needs can keep every pin and every base image inside them. A build without
a row was not measured (download.pytorch.org wheels, say): the rules fall back to the framework
file's own fields for it and say so.

`matrix refresh --requirements` writes the file; this module only reads it.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

    from packaging.specifiers import SpecifierSet

FILE = "requirements.toml"


class Requirements(Record):
    """One [[build]] row. `bounds` keeps METADATA's specifier text (canonical name -> specifier);
    `requires` parses it on access, because importing packaging costs more start-up time than the
    rest of a resolve (envbuild.matrix.bounds answers the rules' questions without it)."""

    __slots__ = ("framework", "version", "variant", "wheel", "extra", "source", "bounds", "where")
    framework: str
    version: str
    variant: str
    wheel: str  # the distribution whose METADATA was read (jax-cuda12-plugin, torch, tensorflow)
    extra: str  # the extra the install uses ("" for none)
    source: str  # "<wheel URL>#sha256=<hex>"
    bounds: dict[str, str]
    where: str  # "requirements.toml [[build]] jax 0.10.2 cuda12": what a caveat points a reader at

    @property
    def requires(self) -> dict[str, SpecifierSet]:
        from packaging.specifiers import SpecifierSet

        return {name: SpecifierSet(text) for name, text in self.bounds.items()}

    def cited(self) -> str:
        """ "jax-cuda12-plugin 0.10.2 [with-cuda]": whose METADATA a caveat quotes."""
        extra = f" [{self.extra}]" if self.extra else ""
        return f"{self.wheel} {self.version}{extra}"


def key(framework: str, version: str, variant: str) -> tuple[str, str, str]:
    return (framework, version, variant)


def build_requirements(rel: str, data: dict[str, Any]) -> dict[tuple[str, str, str], Requirements]:
    """The validated rows of requirements.toml by (framework, version, variant)."""
    rows: dict[tuple[str, str, str], Requirements] = {}
    for row in data.get("build", ()):
        where = f"{rel} [[build]] {row['framework']} {row['version']} {row['variant']}"
        rows[key(row["framework"], row["version"], row["variant"])] = Requirements(
            framework=row["framework"],
            version=row["version"],
            variant=row["variant"],
            wheel=row["wheel"],
            extra=row["extra"],
            source=row["source"],
            bounds=dict(row["requires"]),
            where=where,
        )
    return rows
