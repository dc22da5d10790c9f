"""Bake and the CI generators for a spec with several platforms (issue 19, "Bake and the GitHub
workflow"): one build per target and platform, each natively on a runner of its machine (or under QEMU
with --qemu), verified on its own, and one promote that pushes the multi-platform index."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.scaleout import bake as scaleout
from envbuild.scaleout.github import workflow_yaml
from envbuild.scaleout.gitlab import pipeline_yaml
from envbuild.spec.model import load_spec
from tests.helpers.paths import GOLDEN
from tests.helpers.workflows import INSTALL, yaml_load

PLATFORMS = GOLDEN / "ci" / "platforms.toml"


def workflow(matrix, **kwargs) -> dict:
    return yaml_load(workflow_yaml(matrix, load_spec(str(PLATFORMS)), install=INSTALL, **kwargs))


def test_bake_has_one_target_per_platform_of_a_multi_platform_target(matrix) -> None:
    bake = scaleout.bake_file(matrix, load_spec(str(PLATFORMS)), out_dir="out")
    assert bake["group"]["default"]["targets"] == ["both-amd64", "both-arm64", "x86"]
    amd, arm, x86 = (bake["target"][name] for name in ("both-amd64", "both-arm64", "x86"))
    assert (amd["platforms"], arm["platforms"], x86["platforms"]) == (
        ["linux/amd64"],
        ["linux/arm64"],
        ["linux/amd64"],
    )
    assert (amd["context"], arm["context"], x86["context"]) == ("out/both/amd64", "out/both/arm64", "out/x86")
    assert arm["tags"] == ["ghcr.io/acme/train:candidate-both-arm64"]
    assert x86["tags"] == ["ghcr.io/acme/train:candidate-x86"]
    assert arm["cache-from"] == ["type=registry,ref=ghcr.io/acme/train:buildcache-both-arm64"]
    assert arm["labels"]["io.envbuild.platform"] == "linux/arm64"
    assert amd["labels"]["io.envbuild.platform"] == "linux/amd64"
    jsonschema.Draft202012Validator(scaleout.BAKE_SCHEMA).validate(bake)


def test_an_arm64_only_target_is_one_bake_target_for_arm64(matrix, tmp_path: Path) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(PLATFORMS.read_text().replace('["linux/amd64", "linux/arm64"]', '"linux/arm64"'))
    bake = scaleout.bake_file(matrix, load_spec(str(spec)))
    assert bake["target"]["both"]["platforms"] == ["linux/arm64"]
    assert bake["target"]["both"]["context"] == "build/both"


def test_bake_refuses_a_platform_name_another_target_has(matrix, tmp_path: Path) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(PLATFORMS.read_text().replace('name = "x86"', 'name = "both-arm64"'))
    with pytest.raises(UsageError, match="'both' and 'both-arm64' are both 'both-arm64' as bake targets"):
        scaleout.bake_file(matrix, load_spec(str(spec)))


def test_bake_cli_wants_every_platforms_context(matrix, tmp_path: Path, capsys) -> None:
    out = tmp_path / "ctx"
    (out / "both" / "amd64").mkdir(parents=True)
    (out / "both" / "amd64" / "Dockerfile").write_text("FROM scratch\n")
    (out / "x86").mkdir()
    (out / "x86" / "Dockerfile").write_text("FROM scratch\n")
    args = ["bake", "-f", str(PLATFORMS), "--contexts", str(out), "-o", str(tmp_path / "bake.json")]
    assert main(args) == 2
    assert f"no rendered context (Dockerfile) in {out / 'both' / 'arm64'}" in capsys.readouterr().err
    (out / "both" / "arm64").mkdir()
    (out / "both" / "arm64" / "Dockerfile").write_text("FROM scratch\n")
    assert main(args) == 0


def test_the_workflow_builds_each_platform_on_its_own_runner(matrix) -> None:
    jobs = workflow(matrix)["jobs"]
    include = jobs["build"]["strategy"]["matrix"]["include"]
    assert [(e["build"], e["platform"], e["context"], e["runner"]) for e in include] == [
        ("both-amd64", "linux/amd64", "both/amd64", "ubuntu-latest"),
        ("both-arm64", "linux/arm64", "both/arm64", "ubuntu-24.04-arm"),
        ("x86", "linux/amd64", "x86", "ubuntu-latest"),
    ]
    assert jobs["build"]["runs-on"] == "${{ matrix.runner }}"
    script = next(s["run"] for s in jobs["build"]["steps"] if s.get("id") == "build")
    assert "--platform '${{ matrix.platform }}'" in script and "'build/${{ matrix.context }}'" in script
    assert "candidate-${{ matrix.build }}-${{ github.sha }}" in script
    assert not any("setup-qemu" in str(s.get("uses")) for s in jobs["build"]["steps"])

    verify = jobs["verify"]["strategy"]["matrix"]["include"]
    assert [(e["build"], e["runner"][-1]) for e in verify] == [
        ("both-amd64", "x64"),
        ("both-arm64", "ARM64"),
        ("x86", "x64"),
    ]
    names = [s.get("with", {}).get("name") for s in jobs["verify"]["steps"]]
    assert (
        "digest-${{ matrix.build }}" in names
        and "record-verify-${{ matrix.build }}-${{ matrix.gpu }}" in names
    )


def test_the_promote_job_pushes_one_index_over_every_platform(matrix) -> None:
    promote = workflow(matrix)["jobs"]["promote"]
    assert promote["needs"] == ["verify"]  # after every platform's verify job passed
    steps = {s.get("name"): s for s in promote["steps"]}
    assert steps["Download the candidates' digests"]["with"] == {
        "pattern": "digest-${{ matrix.target }}*",
        "merge-multiple": True,
    }
    both = steps["Promote both"]
    assert both["env"] == {"STAGING": "ghcr.io/acme/train"}
    assert "for build in both-amd64 both-arm64; do" in both["run"]
    assert 'envbuild promote "${images[@]}" --to ghcr.io/acme/train:both-jax' in both["run"]
    assert "grep -Eq '^sha256:[0-9a-f]{64}$'" in both["run"]
    assert "for build in x86; do" in steps["Promote x86"]["run"]


def test_qemu_builds_every_platform_on_x86_runners(matrix, tmp_path: Path) -> None:
    jobs = workflow(matrix, qemu=True)["jobs"]
    include = jobs["build"]["strategy"]["matrix"]["include"]
    assert {e["runner"] for e in include} == {"ubuntu-latest"}
    assert [e["emulated"] for e in include] == [False, True, False]
    qemu = next(s for s in jobs["build"]["steps"] if "setup-qemu" in str(s.get("uses")))
    assert qemu["uses"] == "docker/setup-qemu-action@v3" and qemu["if"] == "${{ matrix.emulated }}"
    assert qemu["with"] == {"platforms": "${{ matrix.platform }}"}

    pins = tmp_path / "pins.txt"
    pins.write_text((GOLDEN / "ci" / "action-pins.txt").read_text())
    with pytest.raises(UsageError, match="no pin for docker/setup-qemu-action@v3"):
        workflow(matrix, qemu=True, action_pins=str(pins))
    # an amd64-only spec has nothing to emulate: --qemu changes nothing there
    two = load_spec(str(GOLDEN / "ci" / "two.toml"))
    assert workflow_yaml(matrix, two, install=INSTALL, qemu=True) == workflow_yaml(
        matrix, two, install=INSTALL
    )


def test_ci_github_cli_takes_qemu(tmp_path: Path, capsys) -> None:
    out = tmp_path / "wf.yml"
    assert main(["ci", "github", "-f", str(PLATFORMS), "-o", str(out), "--qemu", "--install", INSTALL]) == 0
    assert "docker/setup-qemu-action@v3" in out.read_text()


def test_ci_gitlab_refuses_other_platforms(matrix) -> None:
    with pytest.raises(UsageError) as refused:
        pipeline_yaml(matrix, load_spec(str(PLATFORMS)), install=INSTALL)
    assert (
        "builds linux/amd64 only, and target 'both' (linux/arm64) is for another platform"
        in refused.value.message
    )
    assert "envbuild ci github" in (refused.value.fix or "")
