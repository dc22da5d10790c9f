"""Property: every returned stack satisfies every constraint, and no rejected candidate would have.

The oracle below re-derives the rules from their statement (docs/concepts/resolution.md) without the
resolver's code paths, over the whole bundled matrix and random queries.
"""

from __future__ import annotations

from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix, Release, Variant
from envbuild.resolve.query import Query, build_query
from envbuild.resolve.solver import candidate_label, resolve
from tests.helpers.paths import MATRIX_DIR


@cache
def bundled() -> Matrix:
    return load_matrix(MATRIX_DIR)


FRAMEWORK_TEXTS = [
    "torch",
    "tensorflow",
    "jax",
    "torch==2.5.*",
    "torch>=2.8",
    "tf<2.16",
    "jax>=0.6,<0.8",
    "pytorch<2",
    "jax==0.4.*",
]
CUDA_TEXTS = [None, "12.4", ">=12.1", "<12", ">=12,<13", "13", "11.8", ">=13.1"]
PYTHONS = [None, "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
GPU_TEXTS = [
    "H100",
    "L4",
    "RTX 5090",
    "V100",
    "T4",
    "A100",
    "B200",
    "sm_75",
    "8.6",
    "12.1",
    "Tesla K80",
    "GB10",
]


def drivers(matrix: Matrix) -> st.SearchStrategy[str]:
    branches = st.sampled_from(sorted(matrix.branches)).map(str)
    full = st.tuples(st.integers(445, 625), st.integers(0, 200), st.integers(0, 99)).map(
        lambda t: f"{t[0]}.{t[1]}.{t[2]:02d}"
    )
    floors = st.sampled_from([".".join(map(str, c.min_driver)) for c in matrix.cuda if c.min_driver])
    return st.one_of(branches, full, floors)


def options(matrix: Matrix, variant: Variant) -> list[tuple[int, int]]:
    if variant.cuda:
        return [variant.cuda]
    major = variant.cuda_min[0]
    return [
        m for m, row in matrix.ga_floor.items() if m[0] == major and m >= variant.cuda_min and row.min_driver
    ]


def covered(variant: Variant, cc: tuple[int, int], native: bool, platform: str) -> bool:
    """Whether the build's kernels on `platform` (its own list there, else `arch`) run on `cc`."""
    own = {entry.platform: entry.arch for entry in variant.arch_by_platform}
    arch = own.get(platform, variant.arch)
    sass = any(s[0] == cc[0] and s[1] <= cc[1] for s in arch.sass)
    return sass or (native and any(p <= cc for p in arch.ptx))


def cudnn_floor(matrix: Matrix, version: tuple[int, int]) -> tuple[int, int]:
    """Rules: a release between two [[cudnn]] rows has the higher of their floors."""
    rows = sorted((r.version, r.min_cc) for r in matrix.cudnn if r.min_cc)
    exact = [cc for v, cc in rows if v == version]
    if exact:
        return exact[0]
    near = [cc for v, cc in rows if v < version][-1:] + [cc for v, cc in rows if v > version][:1]
    return max(near)


def cudnn_fits(matrix: Matrix, q: Query, variant: Variant, cuda: tuple[int, int]) -> bool:
    """Rules: some cuDNN the install can get (a fixed one, the image's, or a release in the open
    range with a build for the CUDA major) has kernels for every queried GPU."""
    if not q.gpus or not variant.cudnn:
        return True
    lowest = min(g.cc for g in q.gpus)
    text = variant.cudnn.strip()
    if not text[0].isdigit() and q.strategy == "base-image":
        image = matrix.image_for(cuda, q.os or "ubuntu22.04")
        text = image.cudnn if image and image.cudnn else text
    if text[0].isdigit():
        major, minor = text.split(".")[:2]
        return lowest >= cudnn_floor(matrix, (int(major), int(minor)))
    spec = SpecifierSet(text)
    return any(
        lowest >= cudnn_floor(matrix, row.version)
        for row in matrix.cudnn
        if any(lo[0] == cuda[0] for lo, _ in row.cuda)
        and any(f"{row.version[0]}.{row.version[1]}.{p}" in spec for p in (0, 9999))
    )


def _accepts(bundled: str | None, wanted: str) -> bool:
    """Rules: a range is met by containment; an exact version by it or a newer release of its major."""
    if bundled is None:
        return False
    pinned = wanted[2:] if wanted.startswith("==") and "," not in wanted else wanted
    if pinned[:1].isdigit():
        built = Version(pinned).release[:2]
        have = Version(bundled).release[:2]
        return have[0] == built[0] and have >= built
    return Version(bundled) in SpecifierSet(wanted)


def needs_met(matrix: Matrix, q: Query, release: Release, variant: Variant, cuda: tuple[int, int]) -> bool:
    """Rules, "Pins inside the wheels' own bounds" and "Base images bundle what the framework accepts",
    restated with packaging (the resolver reads bounds with envbuild.matrix.bounds)."""
    framework = next(fw.name for fw in matrix.frameworks if release in fw.releases)
    row = matrix.requirements(framework, release.version, variant.name)
    requires = row.requires if row else {}
    suffix = f"-cu{cuda[0]}" if cuda[0] <= 12 else ""
    if q.strategy in (None, "wheels") and variant.cuda_from == "wheels" and variant.cuda is None:
        for base in (
            "nvidia-cuda-runtime",
            "nvidia-cuda-nvrtc",
            "nvidia-cuda-cupti",
            "nvidia-nvjitlink",
            "nvidia-cublas",
        ):
            bound = requires.get(base + suffix)
            if bound is not None and not (bound & SpecifierSet(f"=={cuda[0]}.{cuda[1]}.*")).filter(
                [f"{cuda[0]}.{cuda[1]}.{p}" for p in range(0, 300)]
                + [f"{cuda[0]}.{cuda[1]}.{p}.{q}" for p in range(0, 10) for q in range(0, 200)]
            ):
                return False
    # Rules: a build with its own copies (torch) gets the `base` flavor, which bundles neither
    own = variant.cuda_from == "wheels" and not variant.extra
    if q.strategy == "base-image" and not own:
        image = matrix.image_for(cuda, q.os or "ubuntu22.04")
        assert image is not None
        for field, bundled, name in (
            (variant.cudnn, image.cudnn, f"nvidia-cudnn-cu{cuda[0]}"),
            (variant.nccl, image.nccl, f"nvidia-nccl-cu{cuda[0]}"),
        ):
            row_bound = str(requires[name]) if name in requires else None
            if any(w and not _accepts(bundled, w) for w in (field, row_bound)):
                return False
    return True


def oracle(matrix: Matrix, q: Query, spec, release: Release, variant: Variant) -> bool:
    """Does some CUDA choice of this candidate meet every constraint?"""
    if spec and not any(release.version in one for one in spec):  # repeated filters are OR'ed
        return False
    if q.python is not None and q.python not in release.python:
        return False
    if q.platform not in variant.platforms:  # issue 19: only builds published for the platform
        return False
    if q.strategy == "wheels" and variant.cuda_from != "wheels":
        return False
    for cuda in options(matrix, variant):
        if q.cuda is not None and f"{cuda[0]}.{cuda[1]}" not in q.cuda:
            continue
        if q.strategy == "base-image" and not any(
            i.cuda[:2] == cuda
            and (q.os or "ubuntu22.04") in i.cudnn_os
            and q.platform in (i.platforms or ("linux/amd64",))
            for i in matrix.images
        ):
            continue
        native = q.driver.at_least(matrix.ga_floor[cuda].min_driver)
        compat = q.compat == "minor" and q.driver.at_least(matrix.minor_compat[cuda[0]].min_driver)
        if not (native or compat):
            continue
        if (
            all(covered(variant, gpu.cc, native, q.platform) for gpu in q.gpus)
            and cudnn_fits(matrix, q, variant, cuda)
            and needs_met(matrix, q, release, variant, cuda)
        ):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_stacks_and_rejections_agree_with_the_rules(data: st.DataObject) -> None:
    matrix = bundled()
    query = build_query(
        matrix,
        driver=data.draw(drivers(matrix), label="driver"),
        gpus=data.draw(st.lists(st.sampled_from(GPU_TEXTS), max_size=2), label="gpus"),
        frameworks=data.draw(
            st.lists(st.sampled_from(FRAMEWORK_TEXTS), max_size=2, unique=True), label="frameworks"
        ),
        python=data.draw(st.sampled_from(PYTHONS), label="python"),
        cuda=data.draw(st.sampled_from(CUDA_TEXTS), label="cuda"),
        compat=data.draw(st.sampled_from(["native", "minor"]), label="compat"),
        limit=data.draw(st.sampled_from([None, 1, 3, 50]), label="limit"),
        strategy=data.draw(st.sampled_from([None, "wheels", "base-image", "conda"]), label="strategy"),
        os=data.draw(st.sampled_from([None, "ubuntu22.04", "ubuntu24.04", "debian12"]), label="os"),
    )
    result = resolve(matrix, query)
    targets = [(f.framework, f.specifiers) for f in query.frameworks] or [
        (fw, ()) for fw in matrix.frameworks
    ]
    spec_of = {fw.name: spec for fw, spec in targets}

    for stack in result.stacks:
        spec = spec_of[stack.framework.name]
        assert oracle(matrix, query, spec, stack.release, stack.variant)
        assert query.driver.at_least(stack.min_driver)
        assert stack.cuda in options(matrix, stack.variant)
        assert query.python is None or stack.python == query.python
        assert all(covered(stack.variant, g.cc, stack.mode == "native", query.platform) for g in query.gpus)
        if stack.cudnn_pin is not None:  # a pin is only ever to a release with kernels for every GPU
            assert query.gpus and min(g.cc for g in query.gpus) >= cudnn_floor(matrix, stack.cudnn_pin)
    for rejection in result.rejected:
        spec = spec_of[rejection.framework.name]
        label = candidate_label(rejection.framework, rejection.release, rejection.variant)
        assert not oracle(matrix, query, spec, rejection.release, rejection.variant), label

    # every candidate is accounted for exactly once, and the best stack per framework is the
    # newest release the oracle accepts
    for framework, spec in targets:
        accepted = [
            (r, v) for r in framework.releases for v in r.variants if oracle(matrix, query, spec, r, v)
        ]
        mine = [s for s in result.stacks if s.framework.name == framework.name]
        rejected = [r for r in result.rejected if r.framework.name == framework.name]
        assert len(accepted) + len(rejected) == sum(len(r.variants) for r in framework.releases)
        if result.problems:
            assert mine == []
        elif accepted:
            assert mine, framework.name
            assert mine[0].release.key == max(r.key for r, _ in accepted)
            assert len(mine) == min(query.limit, len(accepted))
        else:
            assert mine == []

    # the minor-compat hint: only on native queries, only a newer release than the native answer,
    # and exactly the newest release the oracle accepts under --compat minor
    minor_query = query.replace(compat="minor")
    for framework, spec in targets:
        mine = [s for s in result.stacks if s.framework.name == framework.name]
        hint = result.with_minor_compat.get(framework.name)
        newer_under_minor = [
            r.key
            for r in framework.releases
            for v in r.variants
            if mine and r.key > mine[0].release.key and oracle(matrix, minor_query, spec, r, v)
        ]
        if query.compat == "minor" or not newer_under_minor:
            assert hint is None, framework.name
        else:
            assert hint is not None and hint.mode == "minor", framework.name
            assert hint.release.key == max(newer_under_minor)


def first_branch(matrix: Matrix, first_cuda: tuple[int, int]) -> int | None:
    """The oracle's floor, from the statement: the branch of first_cuda's GA minimum driver; none when
    first_cuda is older than every CUDA the matrix knows a driver for."""
    known = sorted(m for m, row in matrix.ga_floor.items() if row.min_driver)
    if first_cuda < known[0]:
        return None
    return matrix.ga_floor[first_cuda].min_driver[0]


def spellings(gpu) -> list[str]:
    major, minor = gpu.cc
    return [
        gpu.name,
        *gpu.aliases,
        f"{major}.{minor}",
        f"sm_{major}{minor}",
        f"compute_{major}{minor}",
        f"sm_{major}{minor}a",
    ]


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_no_stack_for_a_gpu_whose_first_branch_is_newer_than_the_driver(data: st.DataObject) -> None:
    """For any GPU of the matrix (by name, alias or capability), any driver and any --compat."""
    matrix = bundled()
    gpu = data.draw(
        st.sampled_from([g for g in matrix.gpus if not g.integrated]), label="gpu"
    )  # Jetson: refused
    text = data.draw(st.sampled_from(spellings(gpu)), label="spelling")
    query = build_query(
        matrix,
        driver=data.draw(drivers(matrix), label="driver"),
        gpus=[text],
        frameworks=data.draw(st.lists(st.sampled_from(FRAMEWORK_TEXTS), max_size=1), label="frameworks"),
        compat=data.draw(st.sampled_from(["native", "minor"]), label="compat"),
        limit=50,
    )
    result = resolve(matrix, query)
    by_name = text in (gpu.name, *gpu.aliases)
    # a capability stands for every GPU that has it: the lowest floor among them
    rows = [gpu] if by_name else [g for g in matrix.gpus if g.cc == gpu.cc]
    floors = [first_branch(matrix, g.first_cuda) for g in rows]
    floor = None if None in floors else min(floors)
    too_old = floor is not None and query.driver.branch < floor
    if too_old:
        assert result.stacks == ()
        assert any(f"needs R{floor} or later" in p for p in result.problems), result.problems
    else:
        assert not any("does not support" in p for p in result.problems), result.problems
