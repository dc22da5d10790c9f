"""reference/environment.md: every environment variable envbuild reads, from its registry
(envbuild/cli/envvars.py, which a test holds to the code both ways), and the tests' own apart."""

from __future__ import annotations

from typing import Any

from docsgen import markdown as md


def variables_table(variables: tuple[Any, ...]) -> str:
    rows = [(md.code(v.name), md.text(v.read_by), md.text(v.effect)) for v in variables]
    return md.table(("variable", "read by", "what it does"), rows)


def page() -> str:
    from envbuild.cli import envvars

    return (
        "# Environment variables\n\n"
        "Every `ENVBUILD_*` variable read by envbuild, by the smoke programs and the preflight guard in "
        "the images it builds, or by the CI files it writes. The table is generated from the list in "
        "`envbuild/cli/envvars.py`; a test fails when the code reads a variable the list lacks, or the "
        "list keeps one nothing reads. Where a variable stands in for a flag, the flag wins when both are "
        "given.\n\n" + variables_table(envvars.VARIABLES) + "\n## The tests' own\n\n"
        "The test suite, the benchmarks and `.ci/run` read these; envbuild never does.\n\n"
        + variables_table(envvars.TEST_VARIABLES)
    )
