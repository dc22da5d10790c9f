"""Every envbuild.toml the guides show is one envbuild accepts: each ```toml block of the getting-started
page, the CI page, the smoke-checks page and the how-to guides is read as `envbuild resolve -f` reads a
spec, and must resolve (exit 0).

A block that is a whole spec (it has `[stack]` with `driver` and `framework`) is checked as it is. A
block that shows a few keys (`[mirrors]`, `[image] repository`, the GPU runner's changes) is checked
in place, merged over the tutorial's own spec (the heredoc of docs/getting-started.md), as a reader
would paste it into that file. Blocks that quote envbuild.lock (`[[target.conda]]`, `[[mirror]]`) are
not specs and are skipped by that mark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild._util import toml
from envbuild.cli.app import main
from tests.helpers import console
from tests.helpers.paths import MATRIX_DIR, REPO

DOCS = REPO / "docs"
PAGES = [
    DOCS / "getting-started.md",
    DOCS / "ci.md",
    DOCS / "smoke-checks.md",
    *sorted((DOCS / "how-to").glob("*.md")),
]
LOCK_EXCERPTS = ("[[target.conda]]", "[[mirror]]", "[[target.package]]")


def tutorial_spec() -> dict:
    """The spec the getting-started page writes with `cat > envbuild.toml <<'EOF'`."""
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    (written,) = [c.text for c in console.commands(page) if c.text.startswith("cat > envbuild.toml <<")]
    return toml.loads("\n".join(written.splitlines()[1:-1]))


def spec_blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for line, language, body in console.fenced_blocks(page.read_text(encoding="utf-8")):
            text = "\n".join(body)
            if language == "toml" and not any(mark in text for mark in LOCK_EXCERPTS):
                found.append((f"{page.relative_to(REPO)}:{line}", text))
    return found


def merged(base: dict, snippet: dict) -> dict:
    """`snippet`'s keys written into `base`, table by table."""
    result = dict(base)
    for key, value in snippet.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = {**result[key], **value}
        else:
            result[key] = value
    return result


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def toml_text(spec: dict) -> str:
    """The spec as a file: its tables, then its [[target]] array (the only array of tables a spec has)."""
    lines = []
    for name, table in spec.items():
        if name == "target":
            continue
        lines.append(f"[{name}]")
        lines += [f"{json.dumps(key)} = {toml_value(value)}" for key, value in table.items()]
    for target in spec.get("target", []):
        lines.append("[[target]]")
        lines += [f"{json.dumps(key)} = {toml_value(value)}" for key, value in target.items()]
    return "\n".join(lines) + "\n"


def test_the_guides_show_spec_examples_and_the_tutorial_writes_a_whole_spec() -> None:
    pages = {where.split(":")[0] for where, _ in spec_blocks()}  # the check below sees the guides' examples
    assert {"docs/getting-started.md", "docs/how-to/conda.md", "docs/how-to/arm64.md"} <= pages
    assert {"driver", "framework"} <= set(tutorial_spec()["stack"])


@pytest.mark.parametrize(("where", "text"), spec_blocks(), ids=[where for where, _ in spec_blocks()])
def test_every_spec_example_of_the_guides_resolves(where: str, text: str, tmp_path: Path, capsys) -> None:
    snippet = toml.loads(text)
    whole = {"driver", "framework"} <= set(snippet.get("stack", {}))
    spec = snippet if whole else merged(tutorial_spec(), snippet)
    path = tmp_path / "envbuild.toml"
    path.write_text(toml_text(spec))
    matrix = spec.get("site", {}).get("matrix")
    if matrix:  # a team's matrix directory next to the spec: the bundled one stands in for it
        (tmp_path / matrix).symlink_to(MATRIX_DIR)
    code = main(["resolve", "-f", str(path), "--limit", "1"])
    printed = capsys.readouterr()
    assert code == 0, f"{where}: envbuild resolve -f exited {code}:\n{printed.err}\n{path.read_text()}"
