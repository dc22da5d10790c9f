"""The base-image strategy's nvidia/cuda flavor (issue 32, item 5): the smallest that still provides what
the build loads from it, recorded with why; and which copy of the CUDA libraries the framework loads,
in the stack JSON (the SBOM side: tests/unit/test_attest_sbom.py).

torch brings its own CUDA libraries (its nvidia-* wheels, which it loads by RPATH), so every library
of a `runtime` or `cudnn-runtime` image would be a copy it never loads: it gets `base`. TensorFlow
without [and-cuda] and jax[cuda12-local] load the image's, so they keep the cuDNN runtime flavor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import LockError
from envbuild.lockfile.model import LockedTarget
from envbuild.matrix.model import Matrix
from envbuild.plan.plan import build_plan, locked_base
from envbuild.spec.model import load_spec


def spec_file(tmp_path: Path, framework: str, driver: str, strategy: str, extra: str = "") -> Path:
    path = tmp_path / "envbuild.toml"
    os_line = "" if strategy == "conda" else 'os = "ubuntu22.04"\n'
    path.write_text(
        f'[stack]\ndriver = "{driver}"\nframework = "{framework}"\ngpus = ["H100"]\n'
        f'strategy = "{strategy}"\n{os_line}\n[image]\nrepository = "registry.example/team/x"\n{extra}'
    )
    return path


def plan(matrix: Matrix, path: Path, **options):
    spec = load_spec(str(path))
    return build_plan(matrix, spec, spec.targets[0], **options)


def test_torch_on_a_base_image_gets_the_base_flavor_and_says_why(matrix: Matrix, tmp_path: Path) -> None:
    chosen = plan(matrix, spec_file(tmp_path, "torch==2.5.1", "550", "base-image"))
    assert chosen.base_image == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    flavor = chosen.stack_document["base_flavor"]
    assert flavor["flavor"] == "base" and flavor["image"] == chosen.base_image
    assert flavor["instead_of"] == "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
    assert "PyTorch installs its own CUDA libraries" in flavor["why"]
    assert "NCCL and cuDNN that it never loads" in flavor["why"]
    loaded = chosen.stack_document["cuda_libraries"]
    assert loaded["loaded_from"] == "framework-wheels" and loaded["path"] == "site-packages/nvidia/*/lib"
    assert "DT_RPATH $ORIGIN/../../nvidia/<library>/lib" in loaded["why"]
    # the labels still name torch's own cuDNN and NCCL (its wheels), and the base it was built on
    labels = dict(chosen.labels)
    assert labels["io.envbuild.cudnn"] == "9.1.0.70" and labels["io.envbuild.nccl"] == "2.21.5"
    assert labels["org.opencontainers.image.base.name"] == chosen.base_image


@pytest.mark.parametrize(
    ("framework", "driver", "image"),
    [
        ("tensorflow==2.15.1", "535", "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"),
        ("jax==0.6.2", "570", "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04"),
    ],
)
def test_frameworks_that_load_the_images_libraries_keep_the_cudnn_flavor(
    matrix: Matrix, tmp_path: Path, framework: str, driver: str, image: str
) -> None:
    chosen = plan(matrix, spec_file(tmp_path, framework, driver, "base-image"))
    assert chosen.base_image == image
    flavor = chosen.stack_document["base_flavor"]
    assert flavor["image"] == image and flavor["instead_of"] is None
    assert flavor["flavor"] == image.split(":")[1].split("-", 1)[1].rsplit("-ubuntu", 1)[0]
    assert "loads the image's cuDNN, NCCL and CUDA libraries" in flavor["why"]
    assert chosen.stack_document["cuda_libraries"]["loaded_from"] == "base-image"


def test_devel_keeps_the_cudnn_devel_build_stage_and_ships_base(matrix: Matrix, tmp_path: Path) -> None:
    chosen = plan(matrix, spec_file(tmp_path, "torch==2.5.1", "550", "base-image", "devel = true\n"))
    assert (chosen.base_image, chosen.runtime_image) == (
        "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04",
        "nvidia/cuda:12.4.1-base-ubuntu22.04",
    )
    assert chosen.stack_document["base_flavor"]["image"] == chosen.runtime_image
    assert (
        "the devel build stage uses nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"
        in (chosen.stack_document["base_flavor"]["why"])
    )


def test_an_explicit_base_image_wins_and_the_choice_says_so(matrix: Matrix, tmp_path: Path) -> None:
    mirror = "registry.local:5000/mirror/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
    chosen = plan(matrix, spec_file(tmp_path, "torch==2.5.1", "550", "base-image"), base_image=mirror)
    assert chosen.base_image == mirror
    assert chosen.stack_document["base_flavor"]["overridden_by"] == mirror


@pytest.mark.parametrize(
    ("strategy", "source", "says"),
    [("wheels", "framework-wheels", "the base is a plain OS image"), ("conda", "conda-env", "conda-forge")],
)
def test_the_other_strategies_say_where_cuda_comes_from(
    matrix: Matrix, tmp_path: Path, strategy: str, source: str, says: str
) -> None:
    chosen = plan(matrix, spec_file(tmp_path, "torch==2.5.1", "550", strategy))
    assert chosen.stack_document["base_flavor"] is None
    loaded = chosen.stack_document["cuda_libraries"]
    assert loaded["loaded_from"] == source and says in loaded["why"]


def test_render_writes_it_to_stack_json(
    matrix: Matrix, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = spec_file(tmp_path, "torch==2.5.1", "550", "base-image")
    assert main(["render", "-f", str(path), "-o", str(tmp_path / "out")]) == 0
    assert "base-image on nvidia/cuda:12.4.1-base-ubuntu22.04" in capsys.readouterr().out
    stack = json.loads((tmp_path / "out" / "default" / "stack.json").read_text())
    assert stack["base_flavor"]["flavor"] == "base"
    assert stack["cuda_libraries"]["loaded_from"] == "framework-wheels"


def test_a_lock_of_the_old_flavor_asks_to_relock(matrix: Matrix, tmp_path: Path) -> None:
    """A torch base-image lock made before pins cudnn-runtime: not what the strategy now gives."""
    chosen = plan(matrix, spec_file(tmp_path, "torch==2.5.1", "550", "base-image"))
    old = "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04@sha256:" + "a" * 64
    lock = LockedTarget(
        name="default",
        platform="linux/amd64",
        strategy="base-image",
        python="3.10",
        base_image=old,
        requirements=(),
        stack=(),
        packages=(),
        conda=(),
    )
    with pytest.raises(LockError) as raised:
        locked_base(lock, chosen.base_image, overridden=False, where="envbuild.toml target 'default'")
    assert "give nvidia/cuda:12.4.1-base-ubuntu22.04" in raised.value.message
    assert "run `envbuild lock`" in raised.value.fix
