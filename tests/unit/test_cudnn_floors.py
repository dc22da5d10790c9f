"""cuDNN hardware floors and the nvidia-* pins, on the bundled matrix (issue 15, items 2, 3 and 7).

Table-driven from the sources the [[cudnn]] rows cite:
* 9.0.0 / 9.5.x / 9.10.2 support matrices: compute capability 5.0 and later;
* 9.17.0 support matrix: 7.5 and later, also for the CUDA 12 build; 9.11+ dropped pre-Turing device
  code (conda-forge/admin-requests PR 1687, pytorch/pytorch PR 165773);
* 8.5.0 matrix: 3.5 and later (CUDA 11 build); 8.9.x matrices: 5.0 and later.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.matrix.model import Matrix
from envbuild.plan.plan import build_plan
from envbuild.resolve.cudnn import floor_of, judge
from envbuild.resolve.pins import stack_pins
from envbuild.resolve.query import build_query
from envbuild.resolve.report import install_hint, to_json, to_text
from envbuild.resolve.solver import Resolution, Stack, candidate_label, resolve
from envbuild.spec.model import load_spec


def run(matrix: Matrix, **kwargs) -> Resolution:
    return resolve(matrix, build_query(matrix, **kwargs))


def best(matrix: Matrix, **kwargs) -> Stack:
    result = run(matrix, limit=1, **kwargs)
    assert result.stacks, to_text(result, matrix)
    return result.stacks[0]


@pytest.mark.parametrize(
    ("version", "floor"),
    [
        ((8, 5), (3, 5)),  # 8.5.0 matrix
        ((8, 1), (3, 5)),  # before the first row: the first row's floor
        ((8, 7), (5, 0)),  # not read: the higher neighbour (8.9) is kept
        ((8, 9), (5, 0)),  # 8.9.1 / 8.9.6 matrices
        ((9, 1), (5, 0)),  # item 7: no Kepler
        ((9, 3), (5, 0)),  # between 9.1 and 9.5, both 5.0
        ((9, 10), (5, 0)),  # last release with Maxwell/Pascal/Volta
        ((9, 11), (7, 5)),  # between 9.10 (5.0) and 9.12 (7.5): the higher
        ((9, 12), (7, 5)),
        ((9, 17), (7, 5)),  # 9.17.0 matrix
        ((9, 26), (7, 5)),  # past the last row: the last row's floor
    ],
)
def test_cudnn_floor_per_release(matrix: Matrix, version: tuple[int, int], floor: tuple[int, int]) -> None:
    assert floor_of(matrix, version) == floor


def test_every_cudnn_row_states_its_floor(matrix: Matrix) -> None:
    assert [r.version for r in matrix.cudnn if r.min_cc is None] == []


@pytest.mark.parametrize(
    ("gpu", "driver", "framework", "cuda", "pin"),
    [
        # the attacks: open ranges would install 9.21 (no kernels below 7.5)
        ("V100", "560.35.03", "tensorflow", (12, 6), (9, 10)),
        ("P100", "560.35.03", "tensorflow", (12, 6), (9, 10)),
        ("V100", "575.57.08", "tensorflow", (12, 9), (9, 10)),
        ("V100", "575.57.08", "jax", (12, 9), (9, 10)),
        ("P100", "560.35.03", "jax", (12, 6), (9, 10)),
        # Turing and later get the newest cuDNN: no pin
        ("T4", "560.35.03", "tensorflow", (12, 6), None),
        ("A100", "575.57.08", "tensorflow", (12, 9), None),
        ("A100", "560.35.03", "jax", (12, 6), None),
    ],
)
def test_open_cudnn_range_is_pinned_below_the_gpus_floor(
    matrix: Matrix,
    gpu: str,
    driver: str,
    framework: str,
    cuda: tuple[int, int],
    pin: tuple[int, int] | None,
) -> None:
    stack = best(matrix, driver=driver, gpus=[gpu], frameworks=[framework])
    assert stack.cuda == cuda
    assert stack.cudnn_pin == pin
    line = install_hint(stack)
    if pin is None:
        assert "nvidia-cudnn" not in line
        assert not any("cuDNN pinned" in c for c in stack.caveats)
    else:
        assert f"'nvidia-cudnn-cu12=={pin[0]}.{pin[1]}.*'" in line
        caveat = next(c for c in stack.caveats if c.startswith("cuDNN pinned"))
        assert f"ships no kernels for Tesla {gpu}" in caveat


def test_k80_under_minor_compat_gets_no_torch_with_cudnn_9_1(matrix: Matrix) -> None:
    result = run(matrix, driver="470.256.02", gpus=["K80"], compat="minor", frameworks=["torch"], limit=50)
    reasons = {candidate_label(r.framework, r.release, r.variant): r.reason for r in result.rejected}
    reason = reasons["torch 2.7.1+cu118"]
    assert (reason.kind, reason.text) == (
        "gpu",
        "cuDNN 9.1 ships no kernels for Tesla K80 (sm_37, needs compute capability >= 5.0)",
    )
    assert all(s.variant.cudnn != "9.1.0.70" for s in result.stacks)
    assert result.stacks[0].variant.cudnn == "8.5.0.96"  # cuDNN 8.5 still has Kepler kernels
    data = json.loads(to_json(result, matrix))
    assert any(r["reason"] == reason.text and r["kind"] == "gpu" for r in data["rejected"])


def test_range_with_no_release_for_the_gpu_is_rejected_with_the_reason(matrix: Matrix) -> None:
    jax = matrix.framework("jax")
    assert jax is not None
    variant = next(v for r in jax.releases for v in r.variants if v.cuda_min == (12, 1))
    narrowed = variant.replace(cudnn=">=9.12,<10")
    gpus = build_query(matrix, driver="575", gpus=["V100"]).gpus
    outcome = judge(matrix, narrowed, (12, 9), gpus, strategy=None, os_name=None)
    assert outcome is not None and outcome.version is None and outcome.short == (gpus[0], (7, 5))
    fits = judge(
        matrix,
        narrowed,
        (12, 9),
        build_query(matrix, driver="575", gpus=["T4"]).gpus,
        strategy=None,
        os_name=None,
    )
    assert fits is not None and fits.short is None and fits.version == (9, 21)


def test_base_image_takes_the_images_cudnn_and_needs_no_pin(matrix: Matrix) -> None:
    stack = best(matrix, driver="575.57.08", gpus=["V100"], frameworks=["tensorflow"], strategy="base-image")
    assert stack.cuda == (12, 9) and stack.cudnn_pin is None  # nvidia/cuda 12.9.1 ships cuDNN 9.10.2
    assert stack_pins(stack, "base-image") == ()


@pytest.mark.parametrize(
    ("driver", "framework", "cuda"),
    [
        ("560.35.03", "tensorflow", "12.6"),
        ("575.57.08", "tensorflow", "12.9"),
        ("560.35.03", "jax", "12.6"),
        ("575.57.08", "jax", "12.9"),
        ("570.86.15", "jax", "12.8"),
    ],
)
def test_open_range_install_line_and_json_pin_the_reported_cuda(
    matrix: Matrix, driver: str, framework: str, cuda: str
) -> None:
    result = run(matrix, driver=driver, frameworks=[framework], limit=1)
    stack = result.stacks[0]
    assert stack.variant.cuda is None and f"{stack.cuda[0]}.{stack.cuda[1]}" == cuda
    pins = stack_pins(stack, None)
    assert f"nvidia-cuda-runtime-cu12=={cuda}.*" in pins
    assert f"nvidia-cublas-cu12=={cuda}.*" in pins
    assert all(p.endswith(f"=={cuda}.*") for p in pins)
    text = to_text(result, matrix)
    assert install_hint(stack) in text
    assert all(f"'{p}'" in install_hint(stack) for p in pins)
    data = json.loads(to_json(result, matrix))["stacks"][0]
    assert data["cuda"] == cuda
    assert data["pins"] == list(pins)
    assert data["install"] == install_hint(stack)


def test_fixed_cuda_builds_get_no_pins(matrix: Matrix) -> None:
    stack = best(matrix, driver="560.35.03", frameworks=["torch"], gpus=["V100"])
    assert stack.variant.cuda is not None and stack_pins(stack, None) == ()
    assert install_hint(stack).count("'") == 2


@pytest.mark.parametrize(("gpu", "driver"), [("V100", "560.35.03"), ("A100", "575.57.08")])
def test_render_constraints_equal_the_resolve_install_line(
    matrix: Matrix, tmp_path: Path, gpu: str, driver: str
) -> None:
    spec_path = tmp_path / "envbuild.toml"
    spec_path.write_text(
        f'[stack]\ndriver = "{driver}"\nframework = "tensorflow"\ngpus = ["{gpu}"]\n'
        'strategy = "wheels"\nos = "ubuntu22.04"\n\n[image]\nrepository = "registry.example/team/tf"\n'
    )
    spec = load_spec(str(spec_path))
    plan = build_plan(matrix, spec, spec.targets[0])
    result = run(matrix, driver=driver, gpus=[gpu], frameworks=["tensorflow"], strategy="wheels", limit=1)
    stack = result.stacks[0]
    same = ("release", "variant", "cuda", "mode", "cudnn_pin")  # render also picks the OS's Python
    assert [getattr(plan.stack, k) for k in same] == [getattr(stack, k) for k in same]
    line = install_hint(stack, "wheels")
    assert plan.constraints[1:] == stack_pins(stack, "wheels")
    assert line == "pip install " + " ".join(
        f"'{r}'" for r in ("tensorflow[and-cuda]==2.21.0", *plan.constraints[1:])
    )
    assert plan.stack_document["pins"] == list(plan.constraints[1:])
