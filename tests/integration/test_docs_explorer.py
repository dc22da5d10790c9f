"""The compatibility explorer, read from the built site, agrees with `envbuild resolve` run through the
CLI: the best stack of every driver branch and framework, what --compat minor adds, and a sample of
the GPU x branch table. Every data cell links to a source the matrix cites, and the page loads
nothing from another host.

The page is read with html.parser (tests/helpers/explorerpage.py); nothing here imports docsgen, so a
generator that computed its own answers, or wrote them wrong, fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from envbuild._util.toml import loads
from envbuild.cli.app import main
from envbuild.matrix.model import Matrix
from tests.helpers.explorerpage import ExplorerPage, Row, read_explorer
from tests.helpers.paths import MATRIX_DIR

# the GPUs every branch is checked for: the example, a Grace part (arm64 hosts only), a retired
# Kepler part (a last branch) and a Blackwell part (a late first branch)
EVERY_BRANCH = ("RTX 4090", "GB200", "Tesla K80", "RTX 5090")
EVERY_NTH_GPU = 7  # and every 7th GPU of the catalogue on one branch each, the branch moving along


@pytest.fixture(scope="module")
def page(built_site: Path) -> ExplorerPage:
    return read_explorer(built_site)


def resolve_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["resolve", *args, "--json"])
    captured = capsys.readouterr()
    assert code in (0, 3), f"envbuild resolve {' '.join(args)}: exit {code}\n{captured.err}"
    return code, json.loads(captured.out)


def stack_fields(attrs: dict[str, str]) -> dict[str, str | None]:
    """A cell's stack as `resolve --json` names the fields."""
    return {
        "framework_version": attrs.get("data-version"),
        "variant": attrs.get("data-variant"),
        "cuda": attrs.get("data-cuda"),
    }


def expected_fields(stack: dict) -> dict[str, str | None]:
    return {
        "framework_version": stack["framework_version"],
        "variant": stack["variant"],
        "cuda": stack["cuda"],
    }


def test_the_page_was_made_from_the_matrix_resolve_reads(page: ExplorerPage, capsys) -> None:
    _, document = resolve_json(capsys, "--driver", "550")
    assert page.attributes["explorer-filter"].get("type") == "search", "the filter box is missing"
    assert page.attributes["explorer-box"]["data-matrix-digest"] == document["matrix_digest"]


def test_every_branch_and_framework_is_resolve_s_first_stack(
    page: ExplorerPage, matrix: Matrix, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {row.branches[0]: row for row in page.tables["branches"]}
    assert sorted(rows) == sorted(matrix.branches), "a driver branch of the matrix has no row"
    wrong = []
    for branch, row in sorted(rows.items()):
        for framework in (fw.name for fw in matrix.frameworks):
            code, document = resolve_json(capsys, "--driver", str(branch), "--framework", framework)
            cell = row.framework_cell(framework)
            assert cell is not None, f"R{branch} has no {framework} cell"
            shown = cell.attrs
            if not document["stacks"]:
                if "data-version" in shown or code != 3:
                    wrong.append(f"R{branch} {framework}: page {stack_fields(shown)}, resolve has no stack")
                continue
            first = document["stacks"][0]
            expected = {**expected_fields(first), "python": first["python"], "compat": first["compat"]}
            got = {
                **stack_fields(shown),
                "python": shown.get("data-python"),
                "compat": shown.get("data-compat"),
            }
            if got != expected:
                wrong.append(f"R{branch} {framework}: page {got}, resolve {expected}")
            wrong += _minor_mismatches(branch, framework, cell.stacks, document["with_minor_compat"])
    assert not wrong, "\n".join(wrong)


def _minor_mismatches(
    branch: int, framework: str, nested: tuple[dict[str, str], ...], minor: dict
) -> list[str]:
    """The cell's --compat minor line against resolve's with_minor_compat: there exactly when resolve
    names a newer release under --compat minor, and that release."""
    shown = [attrs for attrs in nested if attrs.get("data-compat") == "minor"]
    if framework not in minor:
        return [f"R{branch} {framework}: page shows --compat minor {shown}, resolve none"] if shown else []
    expected = expected_fields(minor[framework])
    if len(shown) != 1 or stack_fields(shown[0]) != expected:
        return [
            f"R{branch} {framework}: page --compat minor {[stack_fields(s) for s in shown]}, "
            f"resolve {expected}"
        ]
    return []


def _grid_row(page: ExplorerPage, gpu: str, branch: int) -> Row:
    found = [
        row for row in page.tables["grid"] if row.attrs.get("data-gpu") == gpu and branch in row.branches
    ]
    assert len(found) == 1, f"{gpu} on R{branch}: {len(found)} rows of the GPU x branch table"
    return found[0]


def _sample(matrix: Matrix) -> list[tuple[str, int]]:
    branches = sorted(matrix.branches)
    pairs = [(gpu, branch) for gpu in EVERY_BRANCH for branch in branches]
    discrete = [gpu for gpu in matrix.gpus if not gpu.integrated]
    for i, gpu in enumerate(discrete[::EVERY_NTH_GPU]):
        pairs.append((gpu.name, branches[(i * 5) % len(branches)]))
    return pairs


def test_a_sample_of_gpu_rows_is_what_resolve_gpu_answers(
    page: ExplorerPage, matrix: Matrix, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = []
    sample = _sample(matrix)
    for gpu, branch in sample:
        _, document = resolve_json(capsys, "--gpu", gpu, "--driver", str(branch))
        row = _grid_row(page, gpu, branch)
        if document["problems"]:
            if "explorer-unsupported" not in row.attrs.get("class", "") or any(c.stacks for c in row.cells):
                wrong.append(
                    f"{gpu} R{branch}: resolve cannot drive it ({document['problems'][0]}), "
                    "the page has stacks"
                )
            continue
        firsts: dict[str, dict] = {}
        for stack in document["stacks"]:
            firsts.setdefault(stack["framework"], stack)
        for framework in (fw.name for fw in matrix.frameworks):
            cell = row.framework_cell(framework)
            got = stack_fields(cell.attrs) if cell else None
            expected = expected_fields(firsts[framework]) if framework in firsts else stack_fields({})
            if got != expected:
                wrong.append(f"{gpu} R{branch} {framework}: page {got}, resolve {expected}")
    assert len(sample) > 100 and not wrong, "\n".join(wrong)


def _cited_sources() -> set[str]:
    """Every `source` URL in matrix/*.toml, read from the files themselves."""
    found: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "source" and isinstance(item, str):
                    found.add(item)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in sorted(MATRIX_DIR.rglob("*.toml")):
        walk(loads(path.read_text(encoding="utf-8")))
    return found


def test_every_data_cell_links_to_a_source_the_matrix_cites(page: ExplorerPage) -> None:
    cited = _cited_sources()
    missing, uncited = [], []
    cells = 0
    for name, rows in page.tables.items():
        for row in rows:
            for cell in row.cells:
                cells += 1
                if not cell.links:
                    missing.append(f"{name} {row.attrs}: {cell.text!r}")
                uncited += [f"{name}: {link}" for link in cell.links if link not in cited]
    assert cells > 10_000
    assert not missing, f"{len(missing)} cells without a source link, e.g.\n" + "\n".join(missing[:10])
    assert not uncited, f"{len(uncited)} links to no matrix source, e.g.\n" + "\n".join(uncited[:10])


def test_the_page_loads_nothing_from_another_host(page: ExplorerPage, built_site: Path) -> None:
    assert {r.tag for r in page.resources} >= {"script", "link"}, (
        "the page's own scripts and styles are missing"
    )
    external = [f"<{r.tag} {r.attribute}={r.url}>" for r in page.resources if urlsplit(r.url).netloc]
    assert not external, external
    # nor do the stylesheets it loads (a font @import would fetch from a CDN)
    for resource in page.resources:
        path = (built_site / "explorer" / urlsplit(resource.url).path).resolve()
        if path.suffix == ".css":
            text = path.read_text(encoding="utf-8")
            assert "url(http" not in text.replace(" ", "") and "@import" not in text, path
