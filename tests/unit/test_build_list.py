"""plan.builds, the one build list (issue 35 item 2): render, bake, `ci *` and k8s walk the same
(target, platform) list, so they name every build with the same key and find its context at the same
path. Before it, each spelled `<target>/<arch>` and `<target>-<arch>` by hand."""

from __future__ import annotations

import os

import pytest

from envbuild.errors import UsageError
from envbuild.plan.builds import builds, by_target
from envbuild.render.context import render_spec
from envbuild.scaleout import bake as scaleout
from envbuild.scaleout.ciplan import ci_plan
from envbuild.scaleout.k8s import jobs
from envbuild.spec.model import load_spec
from tests.helpers.paths import GOLDEN

PLATFORMS = GOLDEN / "ci" / "platforms.toml"  # `both` on amd64 and arm64, `x86` on amd64 alone


@pytest.fixture
def spec():
    return load_spec(str(PLATFORMS))


def test_each_platform_of_a_target_with_several_carries_its_arch_and_one_alone_does_not(matrix, spec) -> None:
    listed = builds(matrix, spec)
    assert [(b.target.name, b.platform) for b in listed] == [
        ("both", "linux/amd64"),
        ("both", "linux/arm64"),
        ("x86", "linux/amd64"),
    ]
    assert [b.key for b in listed] == ["both-amd64", "both-arm64", "x86"]
    assert [b.context for b in listed] == ["both/amd64", "both/arm64", "x86"]
    assert listed[1].context_dir("out") == os.path.join("out", "both", "arm64")
    assert all(b.locked is None for b in listed)  # no lock given: nothing locked
    assert list(by_target(listed)) == ["both", "x86"]
    assert [b.platform for b in by_target(listed)["both"]] == ["linux/amd64", "linux/arm64"]


def test_only_names_one_target_and_an_unknown_one_is_a_usage_error(matrix, spec) -> None:
    assert [b.key for b in builds(matrix, spec, only="both")] == ["both-amd64", "both-arm64"]
    with pytest.raises(UsageError, match="--target 'nope' is not a target"):
        builds(matrix, spec, only="nope")


def test_render_bake_ci_and_k8s_name_the_same_builds_at_the_same_paths(matrix, spec) -> None:
    listed = builds(matrix, spec)
    keys = [b.key for b in listed]
    contexts = [b.context for b in listed]
    rendered = render_spec(matrix, spec, str(PLATFORMS), out_dir="out", write=False, warn=lambda _: None)
    assert [r.name for r in rendered] == contexts
    assert [r.plan.platform for r in rendered] == [b.platform for b in listed]
    bake = scaleout.bake_file(matrix, spec, out_dir="out")
    assert [bake["target"][key]["context"] for key in keys] == [f"out/{c}" for c in contexts]
    assert [bake["target"][key]["platforms"] for key in keys] == [[b.platform] for b in listed]
    plan = ci_plan(matrix, spec, install="envbuild")
    assert [(b.key, b.context, b.platform) for b in plan.builds] == [
        (b.key, b.context, b.platform) for b in listed
    ]
    assert [job.build for job in jobs(matrix, spec)] == keys
    missing = scaleout.missing_contexts(spec, "out", matrix)
    assert missing == [b.context_dir("out") for b in listed]  # nothing rendered there: all missing
