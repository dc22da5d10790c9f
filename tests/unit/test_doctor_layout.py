"""`envbuild doctor --image`'s table stays readable with a long image reference (issue 39, item 5): the
name column is bounded, a longer name is printed whole on a line of its own, and every evidence and fix
starts in the same column, instead of each check's evidence pushed 120 characters to the right."""

from __future__ import annotations

from envbuild.host.check import Check
from envbuild.host.doctor import attestation_checks, image_platform_check, to_text

LONG_REF = "registry.internal.example.com:5000/research/vision/train@sha256:" + "a" * 64
SHORT = [
    Check(name="host platform", status="ok", evidence="linux/amd64 (x86_64)", fix=None),
    Check(name="nvidia-smi", status="fail", evidence="nvidia-smi not found", fix="install the driver"),
]


def image_checks() -> list[Check]:
    """The checks `doctor --image` prints for an image: its platform and its attestations."""
    platform = image_platform_check(LONG_REF, {"Os": "linux", "Architecture": "arm64"}, machine="x86_64")
    return [platform, *attestation_checks(LONG_REF, lambda image: "attestations: sbom + provenance")]


def evidence_columns(text: str, checks: list[Check]) -> set[int]:
    """The column where each check's evidence and fix begin, in `text`."""
    lines = text.splitlines()
    columns = set()
    for check in checks:
        for wanted in (check.evidence, f"fix: {check.fix}" if check.fix else None):
            if wanted is not None:
                (line,) = [line for line in lines if line.endswith(wanted)]
                columns.add(len(line) - len(wanted))
    return columns


def test_a_long_image_name_gets_a_line_of_its_own_and_the_evidence_stays_in_one_column() -> None:
    checks = [*SHORT, *image_checks()]
    assert max(len(c.name) for c in checks) > 120
    text = to_text(checks, colour=False)
    lines = text.splitlines()
    for check in checks[2:]:  # the image's: the whole name, alone on its line
        assert f"[{check.status:>4}] {check.name}" in lines
    (column,) = evidence_columns(text, checks)
    assert column < 50
    assert max(len(line) for line in lines if "host platform" in line) < 80


def test_short_names_keep_the_column_as_wide_as_the_widest() -> None:
    text = to_text(SHORT, colour=False)
    assert "[  ok] host platform  linux/amd64 (x86_64)\n" in text
    assert "[fail] nvidia-smi     nvidia-smi not found\n" in text
    assert evidence_columns(text, SHORT) == {len("[  ok] host platform  ")}
