"""Plans that satisfy the frameworks' real requirements (issue 23, item 2): the wheels strategy's pins
stay inside each package's own METADATA bounds, a base image's bundled CUDA, cuDNN and NCCL satisfy
the build's ranges, and resolve applies the same rules, so its answer is what render builds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from envbuild.cli.app import main
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix
from envbuild.plan.plan import build_plan
from envbuild.resolve.pins import stack_pins
from envbuild.resolve.report import stack_json
from envbuild.resolve.solver import Resolution, candidate_label
from envbuild.spec.model import load_spec
from tests.helpers.minimatrix import requirement_row, run, write_minimatrix, write_requirements


def reasons(resolution: Resolution) -> dict[str, str]:
    return {candidate_label(r.framework, r.release, r.variant): r.reason.text for r in resolution.rejected}


def spec_file(tmp_path: Path, framework: str, driver: str, strategy: str, extra: str = "") -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(
        f'[stack]\ndriver = "{driver}"\nframework = "{framework}"\ngpus = ["H100"]\n'
        f'strategy = "{strategy}"\nos = "ubuntu22.04"\n{extra}\n'
        '[image]\nrepository = "registry.example/team/x"\n'
    )
    return path


def plan_for(matrix: Matrix, path: Path):
    spec = load_spec(str(path))
    return build_plan(matrix, spec, spec.targets[0])


# ---------------------------------------------------------------------------------------------
# wheels + JAX: the first render (tests/golden/wheels-jax) and its jax-cuda12-plugin 0.10.2


@pytest.mark.parametrize("version", ["0.6.2", "0.10.2"])
def test_wheels_jax_nvcc_pin_respects_the_plugins_floor(matrix: Matrix, tmp_path: Path, version: str) -> None:
    """R550 runs CUDA 12.4 natively; jax-cuda12-plugin [with-cuda] needs nvidia-cuda-nvcc-cu12>=12.6.85,
    so `==12.4.*` for nvcc could never install. The runtime stays 12.4, nvcc takes its own floor."""
    python = (
        'python = "3.12"\npython-source = "deadsnakes"' if version == "0.10.2" else ""
    )  # 0.10.2 has no wheels for 3.10
    plan = plan_for(matrix, spec_file(tmp_path, f"jax=={version}", "550", "wheels", python))
    assert plan.stack.cuda == (12, 4) and plan.stack.mode == "native"
    constraints = list(plan.constraints)
    assert "nvidia-cuda-nvcc-cu12==12.4.*" not in constraints
    assert "nvidia-cuda-nvcc-cu12>=12.6.85,<13" in constraints
    assert "nvidia-cuda-runtime-cu12==12.4.*" in constraints
    # every pin, intersected with the package's own bound, admits a real release
    row = matrix.requirements("jax", version, "cuda12")
    assert row is not None
    real = {
        "nvidia-cuda-nvcc-cu12": "12.6.85",
        "nvidia-cuda-runtime-cu12": "12.4.127",
        "nvidia-cublas-cu12": "12.4.5.8",
    }
    for line in constraints[1:]:
        pin = Requirement(line)
        if pin.name in real:
            assert Version(real[pin.name]) in pin.specifier & row.requires[pin.name], line
    # the stack says what is true: runtime 12.4 plus ptxas from CUDA >= 12.6
    document = plan.stack_document
    assert document["cuda"] == "12.4"
    assert document["toolchain"] == {"nvidia-cuda-nvcc-cu12": ">=12.6.85,<13"}
    assert any("ptxas" in c and "12.6.85" in c for c in document["caveats"])


def test_resolve_gives_the_same_nvcc_pin_as_render(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["resolve", "--driver", "550", "--framework", "jax==0.10.2", "--strategy", "wheels", "--json"]
    )
    out = capsys.readouterr().out
    assert code == 0
    stack = json.loads(out)["stacks"][0]
    assert stack["cuda"] == "12.4"
    assert "nvidia-cuda-nvcc-cu12>=12.6.85,<13" in stack["pins"]
    assert "'nvidia-cuda-nvcc-cu12>=12.6.85,<13'" in stack["install"]
    assert stack["requirements_source"].endswith(
        "#sha256=76bbfece2f6effb4e8908eb8a5fbf1abbc1125de667683ec2ffba51c63dc57af"
    )


def test_an_install_that_does_not_read_the_wheel_names_no_source(matrix: Matrix) -> None:
    """conda installs jax from conda-forge: the PyPI plugin's METADATA is not what it installs."""
    stack = run(matrix, driver="580", frameworks=["jax==0.12.0.1"], strategy="conda").stacks[0]
    assert stack.needs is None and stack_json(stack, "conda")["requirements_source"] is None


def test_a_newer_driver_keeps_the_minor_pin_for_nvcc(matrix: Matrix) -> None:
    stack = run(matrix, driver="560.35.03", frameworks=["jax==0.10.2"], strategy="wheels").stacks[0]
    assert stack.cuda == (12, 6)
    assert "nvidia-cuda-nvcc-cu12==12.6.*" in stack_pins(stack, "wheels")
    assert stack_json(stack, "wheels")["toolchain"] == {}


# ---------------------------------------------------------------------------------------------
# the rules on a mini matrix: a runtime floor above the driver's CUDA raises the stack's cuda


def mini_with(tmp_path: Path, requires: dict[str, str]) -> Matrix:
    root = write_minimatrix(tmp_path / "m")
    write_requirements(root, requirement_row("ranged", "0.5.0", "cuda12", requires))
    return load_matrix(root)


def test_a_runtime_floor_above_the_native_cuda_rejects_natively(tmp_path: Path) -> None:
    mini = mini_with(tmp_path, {"nvidia-cuda-runtime-cu12": ">=12.6.77"})
    native = run(mini, driver="550", frameworks=["ranged"], strategy="wheels")
    assert native.stacks == ()
    reason = reasons(native)["ranged 0.5.0 [cuda12]"]
    assert reason == (
        "needs driver >= 560.28.03 (CUDA 12.6+), you have R550 (ranged-plugin 0.5.0 [with-cuda] requires "
        "nvidia-cuda-runtime-cu12>=12.6.77, which no CUDA 12.4 release meets)"
    )
    assert native.closest[0].reason.relax == "--compat minor"
    compat = run(mini, driver="550", frameworks=["ranged"], strategy="wheels", compat="minor").stacks[0]
    assert (compat.cuda, compat.mode) == ((12, 6), "minor")  # the lowest minor that installs
    assert (
        "CUDA 12.6: ranged-plugin 0.5.0 [with-cuda] requires nvidia-cuda-runtime-cu12>=12.6.77, "
        "so 12.6 is the lowest CUDA X.Y it installs with"
    ) in compat.caveats
    assert "nvidia-cuda-runtime-cu12==12.6.*" in stack_pins(compat, "wheels")
    newer = run(mini, driver="570", frameworks=["ranged"], strategy="wheels").stacks[0]
    assert (newer.cuda, newer.mode) == ((12, 8), "native")


def test_a_runtime_bound_no_minor_of_the_major_meets_is_rejected(tmp_path: Path) -> None:
    mini = mini_with(tmp_path, {"nvidia-cublas-cu12": ">=13.0"})
    result = run(mini, driver="580", frameworks=["ranged"], strategy="wheels", compat="minor")
    assert result.stacks == ()
    assert reasons(result)["ranged 0.5.0 [cuda12]"] == (
        "ranged-plugin 0.5.0 [with-cuda] requires nvidia-cublas-cu12>=13.0, "
        "which no CUDA 12.x release in the matrix meets"
    )


def test_a_tool_floor_above_the_cuda_pins_the_tool_and_says_so(tmp_path: Path) -> None:
    mini = mini_with(tmp_path, {"nvidia-cuda-nvcc-cu12": ">=12.6.85", "nvidia-cuda-runtime-cu12": ">=12.0"})
    stack = run(mini, driver="550", frameworks=["ranged"], strategy="wheels").stacks[0]
    assert (stack.cuda, stack.mode) == ((12, 4), "native")
    pins = stack_pins(stack, "wheels")
    assert "nvidia-cuda-nvcc-cu12>=12.6.85,<13" in pins and "nvidia-cuda-runtime-cu12==12.4.*" in pins
    assert stack.toolchain == (("nvidia-cuda-nvcc-cu12", ">=12.6.85,<13"),)


def test_a_build_without_a_row_keeps_todays_pins_and_says_so(tmp_path: Path) -> None:
    root = write_minimatrix(tmp_path / "m")
    write_requirements(
        root, requirement_row("fw", "1.0.1", "cu124", {"nvidia-cuda-runtime-cu12": "==12.4.127"})
    )
    stack = run(load_matrix(root), driver="550", frameworks=["ranged"], strategy="wheels").stacks[0]
    assert "nvidia-cuda-nvcc-cu12==12.4.*" in stack_pins(stack, "wheels")
    assert any("requirements not read from METADATA" in c for c in stack.caveats)
    mini = load_matrix(write_minimatrix(tmp_path / "bare"))  # no requirements.toml: nothing to say
    plain = run(mini, driver="550", frameworks=["ranged"], strategy="wheels").stacks[0]
    assert not any("METADATA" in c for c in plain.caveats)


# ---------------------------------------------------------------------------------------------
# base-image: the image's bundled cuDNN / NCCL / CUDA satisfy the build's ranges


def test_base_image_jax_is_rejected_where_no_image_the_driver_runs_has_its_cudnn(
    matrix: Matrix, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's second render: nvidia/cuda:12.4.1-cudnn ships cuDNN 9.1.0.70, jax 0.6.2 needs
    >=9.8,<10.0; the first image with it (12.8.1) needs R570."""
    result = run(matrix, driver="550", frameworks=["jax==0.6.2"], strategy="base-image", gpus=["H100"])
    assert result.stacks == ()
    assert reasons(result)["jax 0.6.2 [cuda12]"] == (
        "no nvidia/cuda image in the matrix bundles cuDNN >=9.8,<10.0 for CUDA 12.x that driver R550 runs "
        "(nvidia/cuda 12.4.1 ships cuDNN 9.1.0.70; 12.8.1 has 9.8.0.87 but needs driver >= 570.26)"
    )
    path = spec_file(tmp_path, "jax==0.6.2", "550", "base-image")
    assert main(["render", "-f", str(path), "-o", str(tmp_path / "out")]) == 3
    assert "cuDNN >=9.8,<10.0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("driver", "extra", "mode"), [("570", "", "native"), ("550", 'compat = "minor"', "minor")]
)
def test_base_image_jax_picks_the_image_whose_cudnn_fits(
    matrix: Matrix, tmp_path: Path, driver: str, extra: str, mode: str
) -> None:
    plan = plan_for(matrix, spec_file(tmp_path, "jax==0.6.2", driver, "base-image", extra))
    assert plan.base_image == "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04"  # cuDNN 9.8.0.87, NCCL 2.25.1
    assert (plan.stack.cuda, plan.stack.mode) == ((12, 8), mode)


def test_base_image_torch_is_not_held_to_libraries_its_flavor_lacks(matrix: Matrix, tmp_path: Path) -> None:
    """torch keeps its nvidia-* wheels on a base image, which is then the release's `base` flavor: no
    cuDNN, no NCCL. Before, torch 2.7.1+cu126 was refused because nvidia/cuda 12.6.3's cudnn-runtime
    flavor bundles NCCL 2.23.4 (torch is built with 2.26.2), and 2.8.0+cu128 because 12.8.1 bundles
    cuDNN 9.8.0.87 (torch needs 9.10.2.21): copies the build no longer carries. A framework that loads
    the image's libraries is still held to them (TensorFlow, below)."""
    result = run(
        matrix, driver="560", frameworks=["torch==2.7.1"], strategy="base-image", gpus=["H100"], limit=5
    )
    assert "torch 2.7.1+cu126" not in reasons(result)
    assert labels_of(result.stacks[0]) == "torch 2.7.1+cu126"
    newer = run(matrix, driver="570", frameworks=["torch==2.8.0"], strategy="base-image", gpus=["H100"])
    assert labels_of(newer.stacks[0]) == "torch 2.8.0+cu128"
    plan = plan_for(matrix, spec_file(tmp_path, "torch==2.8.0", "570", "base-image"))
    assert plan.base_image == "nvidia/cuda:12.8.1-base-ubuntu22.04"


def labels_of(stack) -> str:
    return candidate_label(stack.framework, stack.release, stack.variant)


def test_base_image_tensorflow_without_and_cuda_needs_the_images_cudnn_major(matrix: Matrix) -> None:
    """TF 2.16/2.17 are built with cuDNN 8.9.7.29; the CUDA 12.3 image is the cudnn9 one."""
    result = run(
        matrix, driver="550", frameworks=["tensorflow"], strategy="base-image", gpus=["A100"], limit=5
    )
    assert reasons(result)["tensorflow 2.17.1 [cuda12.3]"] == (
        "nvidia/cuda 12.3.2 bundles cuDNN 9.0.0.312, but the build needs 8.9.7.29 or a newer 8.x"
    )
    assert [labels_of(s) for s in result.stacks][:1] == ["tensorflow 2.15.1 [cuda12.2]"]


def test_the_golden_base_images_still_fit(matrix: Matrix) -> None:
    """torch 2.5.1+cu124 on 12.4.1 and TF 2.15.1 on 12.2.2: the row's exact pins are what the build was
    compiled with, and the image's release of that major and minor (or newer) satisfies them."""
    torch = run(
        matrix, driver="550", frameworks=["torch==2.5.1"], strategy="base-image", gpus=["H100"]
    ).stacks
    assert labels_of(torch[0]) == "torch 2.5.1+cu124"
    tf = run(
        matrix, driver="535", frameworks=["tensorflow==2.15.1"], strategy="base-image", gpus=["H100"]
    ).stacks
    assert [labels_of(s) for s in tf] == ["tensorflow 2.15.1 [cuda12.2]"]


def test_resolve_and_render_agree_on_base_image(matrix: Matrix, tmp_path: Path) -> None:
    plan = plan_for(matrix, spec_file(tmp_path, "tensorflow", "570", "base-image"))
    stack = run(
        matrix, driver="570", frameworks=["tensorflow"], strategy="base-image", gpus=["H100"], python="3.10"
    ).stacks[0]
    assert (plan.stack.release, plan.stack.variant, plan.stack.cuda) == (
        stack.release,
        stack.variant,
        stack.cuda,
    )
    # TF 2.21 needs NCCL >=2.27.7 and nvidia/cuda 12.8.1 bundles 2.25.1: TF 2.20 (>=2.25.1) is what fits
    assert (stack.release.version, plan.base_image) == (
        "2.20.0",
        "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04",
    )
