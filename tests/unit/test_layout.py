"""The layout holds: packages layered, no import circle, a small top level, tests and benchmarks apart.

Every `import` in envbuild/ counts, at module level, inside functions and under TYPE_CHECKING alike: an
import hidden in a function is still a dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

PACKAGE = REPO / "envbuild"

# Lowest first, in the order the data flows. A unit may import only units before it. smoke sits low:
# its programs and its report format are data that render, image, host and spec carry; pipeline and cli
# sit on top of all stages. docs/development.md's layout section lists the same packages in the same order.
LAYERS = (
    "envbuild",  # __init__: the version
    "envbuild.errors",
    "envbuild._util",
    "envbuild.oci",
    "envbuild.preflight",  # the in-image guard (standard library only) and its judge: matrix uses its keys
    "envbuild.smoke",
    "envbuild.matrix",
    "envbuild.audit",
    "envbuild.spec",  # only what a team writes: envbuild.toml
    "envbuild.lockfile",  # envbuild.lock: model, bytes, seal, problems
    "envbuild.resolve",
    "envbuild.refresh",  # `matrix refresh`: reads upstream, writes matrix data; beside resolve, off the build
    "envbuild.plan",  # Plan: what lock, render, build and attest hand on
    "envbuild.lock",  # writes envbuild.lock from plans; never imports render
    "envbuild.vendor",  # `envbuild vendor`: the lock's files into a bundle; the check that one covers a lock
    "envbuild.render",  # Plan -> files
    "envbuild.engine",  # the one container-engine interface: nothing else builds a Docker client
    "envbuild.image",
    "envbuild.runtime",  # the smoke step on Docker, Apptainer, Enroot, Charliecloud: judged by image.verify
    "envbuild.attest",  # SBOM and provenance: built from what image read, attached through oci
    "envbuild.stages",  # render, build, audit, verify, promote, attest: one module each, one run()
    "envbuild.host",
    "envbuild.scaleout",
    "envbuild.pipeline",
    "envbuild.cli",
    "envbuild.__main__",
    "envbuild._testing",  # the tests' and benchmarks' services: nothing in the tool imports them
)


# envbuild._testing is private to this repository, and shared by its tests and benchmarks on purpose.
SHARED_PRIVATE = {"_testing"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path) -> set[str]:
    """Every module `path` imports (absolute, resolved relative imports), anywhere in the file."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def envbuild_modules() -> dict[str, Path]:
    return {module_name(p, PACKAGE): p for p in PACKAGE.rglob("*.py") if "recordings" not in p.parts}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def module_graph() -> dict[str, set[str]]:
    modules = envbuild_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in imports(path, PACKAGE):
            while imported and imported not in modules:  # a name imported from a module
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def test_every_unit_is_in_the_layer_list() -> None:
    units = {unit_of(m) for m in envbuild_modules()}
    assert units == set(LAYERS), "add a new package or top-level module to LAYERS (and docs/development.md)"


def documented_layout() -> list[str]:
    """The units docs/development.md's layout section lists, in its order: each `  name/` or `  name.py`
    line of the `envbuild/` block that follows "in the order the data flows"."""
    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    section = text[text.index("in the order the data flows") :]
    block = section[section.index("```\nenvbuild/\n") + len("```\nenvbuild/\n") :]
    block = block[: block.index("```")]
    units = []
    for line in block.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name = line.split()[0]
            if name == "__init__.py":
                units.append("envbuild")
            else:
                units.append("envbuild." + name.removesuffix("/").removesuffix(".py"))
    return units


def test_development_page_layout_lists_the_layers_in_order() -> None:
    """docs/development.md tells a new maintainer where each stage lives: it must name every unit in
    LAYERS, no other, in the same order, or it reads as a pipeline the code is not."""
    listed = documented_layout()
    page = "docs/development.md's layout section"
    assert sorted(set(LAYERS) - set(listed)) == [], f"in LAYERS but not in {page}"
    assert sorted(set(listed) - set(LAYERS)) == [], f"in {page} but not in LAYERS"
    assert listed == list(LAYERS), f"{page} lists the units in another order"


def documented_modules() -> dict[str, str]:
    """Each package's entry in docs/development.md's layout block (its line and the indented lines
    under it), by the package's directory name."""
    text = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    block = text[text.index("```\nenvbuild/\n") :]
    block = block[: block.index("```", 4)]
    entries = re.findall(r"^  (\w+)/(.*?)(?=^  \S|^\S|\Z)", block, re.S | re.M)
    return {name: entry for name, entry in entries}


def test_development_page_names_every_module_of_each_package() -> None:
    """The layout drifted once (issue 39: modules added, never described). Each package's entry names
    every module and subpackage it has, so a new one is described where a maintainer looks for it."""
    entries = documented_modules()
    unnamed = []
    packages = [path for path in PACKAGE.iterdir() if (path / "__init__.py").exists()]
    for package in sorted(packages):
        if package.name == "_testing":  # the tests' services: described as a whole
            continue
        entry = entries.get(package.name, "")
        for child in sorted(package.iterdir()):
            name = child.stem if child.suffix == ".py" else child.name
            is_module = child.suffix == ".py" or (child / "__init__.py").exists()
            if is_module and name != "__init__" and not re.search(rf"\b{re.escape(name)}\b", entry):
                unnamed.append(f"{package.name}/{child.name}")
    assert unnamed == [], f"describe these in docs/development.md's layout block: {unnamed}"


def test_no_package_imports_one_above_it() -> None:
    upward = []
    for module, targets in module_graph().items():
        for target in targets:
            source, destination = unit_of(module), unit_of(target)
            if source != destination and LAYERS.index(destination) >= LAYERS.index(source):
                upward.append(f"{module} imports {target}")
    assert upward == []


def test_no_import_circle_between_modules() -> None:
    graph = module_graph()
    circles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if target == node or (node.startswith(target + ".") and target in graph):
                continue  # a package's own __init__ importing its submodule
            if state.get(target) == 1:
                circles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_at_most_eight_top_level_modules() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top


@pytest.mark.parametrize("where", ["bench", "tests"])
def test_no_test_module_or_private_name_is_imported(where: str) -> None:
    """bench/ imports nothing from tests/; a test imports helpers, never another test module, and no
    private name (`from x import _y`)."""
    wrong = []
    for path in sorted((REPO / where).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                module, names = node.module or "", [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                module, names = "", [a.name for a in node.names]
            else:
                continue
            targets = [module] if module else names
            for target in targets:
                if where == "bench" and target.split(".")[0] == "tests":
                    wrong.append(f"{path.relative_to(REPO)}: {target}")
                if target.startswith("tests.") and not target.startswith("tests.helpers"):
                    wrong.append(f"{path.relative_to(REPO)}: {target}")
            wrong += [
                f"{path.relative_to(REPO)}: {module}.{n}"
                for n in names
                if n.startswith("_") and n[:2] != "__"
            ]
    assert wrong == []


# what makes a Docker client: the docker SDK's constructors, called anywhere but envbuild.engine
CLIENT_MAKERS = {"from_env", "APIClient", "DockerClient"}


def client_makers(path: Path) -> list[str]:
    """`name (line N)` for each call of a Docker client constructor in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in CLIENT_MAKERS:
                found.append(f"{name} (line {node.lineno})")
    return found


def test_only_the_engine_package_builds_a_docker_client() -> None:
    """One ContainerEngine (issue 35): where the engine is and how long a request may wait are decided
    in envbuild.engine, so a remote engine, Podman or a new timeout is one edit, not a dozen."""
    outside = {
        name: made
        for name, path in envbuild_modules().items()
        if unit_of(name) != "envbuild.engine" and (made := client_makers(path))
    }
    assert outside == {}, "ask envbuild.engine.current_engine() for a client instead"
    inside = [client_makers(p) for n, p in envbuild_modules().items() if unit_of(n) == "envbuild.engine"]
    assert any(inside), "the scan finds the engine's own constructors (it can fail)"


def long_functions(path: Path, limit: int) -> list[str]:
    """`name (N lines)` for each function in `path` longer than `limit` lines, decorators included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append(f"{node.name} ({length} lines)")
    return found


def test_the_runner_and_its_stages_have_no_function_over_80_lines() -> None:
    """The pipeline reads as its stages (issue 35): build_target was 176 lines, six stages inline."""
    paths = [PACKAGE / "pipeline.py", *sorted((PACKAGE / "stages").glob("*.py"))]
    assert len(paths) > 5
    assert {str(p.relative_to(PACKAGE)): long for p in paths if (long := long_functions(p, 80))} == {}
    assert long_functions(PACKAGE / "pipeline.py", 10), "the scan measures functions (it can fail)"


def record_keyed(path: Path) -> list[str]:
    """`record[...] (line N)` / `record.get (line N)` wherever `path` reads or writes a variable named
    record by string key: the build record is a typed BuildRecord, read by attribute."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "record"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            found.append(f"record[{node.slice.value!r}] (line {node.lineno})")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "record"
            and node.attr in ("get", "setdefault", "items", "keys")
        ):
            found.append(f"record.{node.attr} (line {node.lineno})")
    return found


def test_no_module_reads_a_record_by_string_key() -> None:
    """One typed BuildRecord (issue 35 item 4): its schema was comments in attest/fields.py and about
    80 string-keyed reads and writes that a typo in any of them broke silently."""
    keyed = {name: found for name, path in envbuild_modules().items() if (found := record_keyed(path))}
    assert keyed == {}, "read the build record's fields as attributes (envbuild.attest.record)"
    sample = PACKAGE.parent / "tests" / "unit" / "test_attest_sbom.py"
    assert record_keyed(sample), "the scan finds a string-keyed record (it can fail)"


STRATEGY_NAMES = {"wheels", "base-image", "conda"}


def strategy_comparisons(path: Path) -> list[str]:
    """`line N` for each comparison of a strategy (a name or attribute `strategy`) with a strategy's
    name in `path`."""

    def is_strategy(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "strategy") or (
            isinstance(node, ast.Attribute) and node.attr == "strategy"
        )

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Constant) and s.value in STRATEGY_NAMES for s in sides)
            if named and any(is_strategy(s) for s in sides):
                found.append(f"line {node.lineno}")
    return found


def test_no_stage_from_the_plan_up_compares_strategy_names() -> None:
    """One module per CUDA strategy (issue 35 item 5): from plan/ up, a stage asks the Strategy
    (plan.strategy.strategy_for) what it does, so a new strategy is a module, not a hunt for
    `== "conda"`. Below plan/ (spec, lockfile, resolve, audit) the rules choose among matrix rows
    before any plan exists, and the layering keeps them from importing plan/."""
    floor = LAYERS.index("envbuild.plan")
    above = {
        name: found
        for name, path in envbuild_modules().items()
        if LAYERS.index(unit_of(name)) >= floor
        and not name.startswith("envbuild.plan.strategy")
        and (found := strategy_comparisons(path))
    }
    assert above == {}, "ask strategy_for(name) for the decision instead of comparing names"
    assert strategy_comparisons(PACKAGE / "resolve" / "solver.py"), "the scan finds one (it can fail)"
