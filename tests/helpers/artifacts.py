"""Files a test keeps for people to look at (the explorer's screenshot), named in pytest's terminal
summary so a CI log says where they are."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.summary import SummarySection

KEPT = SummarySection(title="files kept", property="envbuild-artifact")


def keep(path: Path, what: str) -> None:
    """Name `path` in the summary: "explorer-rtx-4090.png: the explorer filtered to RTX 4090"."""
    KEPT.add(f"{path}: {what}")
