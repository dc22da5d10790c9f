"""Issue 18, items 1 and 2 as rendered: uv installs inside images (`[image] installer`), uv enters a build
only by a bind mount and checked against its RECORD, and a lock's CUDA wheels get a layer of their own
whose inputs a framework patch release does not change."""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.lockfile.model import LockedPackage, LockedTarget
from envbuild.matrix.model import Matrix
from envbuild.plan.cudalayer import is_cuda_package
from envbuild.plan.plan import build_plan
from envbuild.render.context import render_files
from envbuild.spec.model import load_spec

BASE = "debian:bookworm-slim@sha256:" + "a" * 64
SPEC = """
[stack]
driver = "580"
framework = "torch=={version}"
python = "3.11"
os = "debian12"
strategy = "wheels"

[packages]
pip = ["six==1.16.0"]
{image}"""


def write_spec(tmp_path: Path, version: str = "2.12.0", image: str = "") -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(SPEC.format(version=version, image=image))
    return path


def package(name: str, version: str, layer: str = "framework") -> LockedPackage:
    digest = hashlib.sha256(f"{name}-{version}".encode()).hexdigest()
    return LockedPackage(
        name=name, version=version, layer=layer, index="https://pypi.org/simple", hashes=(f"sha256:{digest}",)
    )


def locked(version: str) -> LockedTarget:
    """A lock of torch `version` from PyPI (cu130) with its CUDA wheels, as `envbuild lock` writes one."""
    return LockedTarget(
        name="default",
        platform="linux/amd64",
        strategy="wheels",
        python="3.11",
        base_image=BASE,
        requirements=(f"torch=={version}", "six==1.16.0"),
        stack=(),
        packages=(
            package("torch", version),
            package("cuda-toolkit", "13.0.2"),
            package("filelock", "3.20.0"),
            package("nvidia-cublas", "13.0.2.14"),
            package("nvidia-cudnn-cu13", "9.20.0.48"),
            package("triton", "3.6.0"),
            package("six", "1.16.0", "user"),
        ),
        conda=(),
    )


def rendered(matrix: Matrix, tmp_path: Path, version: str, *, buildkit: bool = True) -> dict[str, bytes]:
    spec = load_spec(str(write_spec(tmp_path, version)))
    plan = build_plan(matrix, spec, spec.targets[0], lock=locked(version), buildkit=buildkit, wheelhouse=True)
    return render_files(plan)


# --- item 1: uv as the installer ------------------------------------------------------------------


def test_uv_is_the_default_installer_and_comes_in_by_a_mount(tmp_path: Path, capsys) -> None:
    spec = write_spec(tmp_path)
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    context = tmp_path / "out" / "default"
    dockerfile = (context / "Dockerfile").read_text()
    assert "RUN --mount=type=bind,source=uv,target=/opt/envbuild-uv /opt/envbuild-uv/uv venv" in dockerfile
    assert dockerfile.count("/opt/envbuild-uv/uv pip install --python /opt/venv/bin/python") == 2
    assert "pip install --no-cache-dir" not in dockerfile and "-m venv" not in dockerfile
    # uv is never COPYed: no layer holds it
    assert not any(line.startswith("COPY") and "uv" in line.split()[1:-1] for line in dockerfile.splitlines())
    assert "!uv" in (context / ".dockerignore").read_text()
    binary = context / "uv" / "uv"
    assert os.access(binary, os.X_OK) and binary.read_bytes()[:4] == b"\x7fELF"


def test_installer_pip_renders_the_pip_install(tmp_path: Path, capsys) -> None:
    spec = write_spec(tmp_path, image='[image]\ninstaller = "pip"\n')
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    context = tmp_path / "out" / "default"
    dockerfile = (context / "Dockerfile").read_text()
    assert "RUN python3 -m venv /opt/venv" in dockerfile
    assert dockerfile.count("RUN pip install --no-cache-dir --index-url https://pypi.org/simple") == 2
    assert "uv" not in dockerfile.replace("ubuntu", "") and not (context / "uv").exists()
    assert "!uv" not in (context / ".dockerignore").read_text()


@pytest.mark.parametrize("value", ['"conda"', '"UV"', "true", '""'])
def test_an_unknown_installer_is_a_usage_error_naming_the_field(tmp_path: Path, capsys, value: str) -> None:
    spec = write_spec(tmp_path, image=f"[image]\ninstaller = {value}\n")
    assert main(["render", "-f", str(spec), "--stdout"]) == 2
    err = capsys.readouterr().err
    assert "installer" in err and "[image]" in err and "Traceback" not in err and "internal error" not in err


def test_the_api_backend_installs_with_pip_so_uv_never_sits_in_a_layer(
    matrix: Matrix, tmp_path: Path
) -> None:
    files = rendered(matrix, tmp_path, "2.12.0", buildkit=False)
    dockerfile = files["Dockerfile"].decode()
    assert "--mount" not in dockerfile and "envbuild-uv" not in dockerfile
    assert "RUN python3 -m venv /opt/venv" in dockerfile and "RUN pip install --no-cache-dir" in dockerfile
    assert "!uv" not in files[".dockerignore"].decode()


def test_a_locked_uv_install_checks_every_hash(matrix: Matrix, tmp_path: Path) -> None:
    dockerfile = rendered(matrix, tmp_path, "2.12.0")["Dockerfile"].decode()
    installs = [line for line in dockerfile.splitlines() if "/opt/envbuild-uv/uv pip install" in line]
    assert len(installs) == 3 and all("--require-hashes --no-deps" in line for line in installs)


def wheelhouse_with_uv(directory: Path, binary: bytes, recorded: bytes) -> Path:
    """A wheelhouse holding a torch wheel and a uv wheel of the host's uv version whose RECORD states
    the sha256 of `recorded` for the binary it carries (`binary`)."""
    from importlib import metadata

    from envbuild._testing.pyindex import build_wheel

    directory.mkdir()
    build_wheel(directory, "torch", "2.12.0")
    version = metadata.version("uv")
    digest = base64.urlsafe_b64encode(hashlib.sha256(recorded).digest()).rstrip(b"=").decode()
    path = directory / f"uv-{version}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"uv-{version}.data/scripts/uv", binary)
        archive.writestr(
            f"uv-{version}.dist-info/RECORD",
            f"uv-{version}.data/scripts/uv,sha256={digest},{len(recorded)}\nuv-{version}.dist-info/RECORD,,\n",
        )
    return directory


def test_uv_from_the_wheelhouse_is_checked_against_its_record(tmp_path: Path, capsys) -> None:
    spec = write_spec(tmp_path)
    good = wheelhouse_with_uv(tmp_path / "good", b"\x7fELF uv", b"\x7fELF uv")
    args = ["render", "-f", str(spec), "--wheelhouse"]
    assert main([*args, str(good), "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert (tmp_path / "out" / "default" / "uv" / "uv").read_bytes() == b"\x7fELF uv"

    altered = wheelhouse_with_uv(tmp_path / "altered", b"\x7fELF evil", b"\x7fELF uv")
    assert main([*args, str(altered), "-o", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert "uv binary's sha256" in err and "altered" in err and not (tmp_path / "out2" / "default").exists()


def test_a_wheelhouse_without_uv_names_the_wheel_to_download(tmp_path: Path, capsys) -> None:
    from envbuild._testing.pyindex import build_wheel

    build_wheel(tmp_path / "wheels", "torch", "2.12.0")
    spec = write_spec(tmp_path)
    code = main(
        ["render", "-f", str(spec), "--wheelhouse", str(tmp_path / "wheels"), "-o", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "installer uv" in err and "pip download uv==" in err and 'installer = "pip"' in err


# --- item 2: the CUDA libraries in their own layer -------------------------------------------------


def test_the_cuda_set_is_defined_by_name() -> None:
    cuda = ["nvidia-cublas-cu12", "nvidia_cudnn_cu13", "nvidia-nccl-cu12", "cuda-toolkit", "triton"]
    assert all(is_cuda_package(name) for name in cuda)
    assert not any(is_cuda_package(name) for name in ("torch", "jax-cuda12-plugin", "cudf", "six"))


def test_the_locks_cuda_wheels_install_in_a_layer_before_the_framework(
    matrix: Matrix, tmp_path: Path
) -> None:
    files = rendered(matrix, tmp_path, "2.12.0")
    cuda = files["requirements-cuda.txt"].decode()
    framework = files["requirements-framework.txt"].decode()
    assert [line.split("==")[0] for line in cuda.splitlines() if "==" in line] == [
        "cuda-toolkit",
        "nvidia-cublas",
        "nvidia-cudnn-cu13",
        "triton",
    ]
    assert cuda.count("--hash=sha256:") == 4
    assert [line.split("==")[0] for line in framework.splitlines() if "==" in line] == ["torch", "filelock"]
    dockerfile = files["Dockerfile"].decode()
    cuda_run = dockerfile.index("-r /opt/envbuild/requirements-cuda.txt")
    assert dockerfile.index("COPY requirements-cuda.txt /opt/envbuild/\n") < cuda_run
    assert cuda_run < dockerfile.index("COPY requirements-framework.txt constraints.txt")
    # the CUDA RUN sees only its own wheels
    run_line = dockerfile[:cuda_run].rsplit("\nRUN ", 1)[1]
    assert "source=wheels/cuda" in run_line and "wheels/framework" not in run_line
    assert "!requirements-cuda.txt" in files[".dockerignore"].decode()


def test_a_framework_patch_release_leaves_the_cuda_layers_inputs_unchanged(
    matrix: Matrix, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old, new = rendered(matrix, tmp_path / "a", "2.12.0"), rendered(matrix, tmp_path / "b", "2.12.1")
    assert old["requirements-cuda.txt"] == new["requirements-cuda.txt"]
    assert old["requirements-framework.txt"] != new["requirements-framework.txt"]
    # every Dockerfile line up to and including the CUDA layer's RUN is the same
    end = "-r /opt/envbuild/requirements-cuda.txt\n"
    first, second = old["Dockerfile"].decode(), new["Dockerfile"].decode()
    assert first[: first.index(end)] == second[: second.index(end)]
    assert first != second


def test_the_wheelhouse_gives_the_cuda_layer_only_cuda_wheels(tmp_path: Path) -> None:
    from envbuild._testing.pyindex import build_wheel
    from envbuild.render.wheelhouse import split_wheelhouse

    build_wheel(tmp_path / "in", "torch", "2.12.1", ["nvidia-cublas==13.0.2.14", "filelock"])
    for name, version in (("nvidia-cublas", "13.0.2.14"), ("filelock", "3.20.0"), ("six", "1.16.0")):
        build_wheel(tmp_path / "in", name, version)
    split_wheelhouse(str(tmp_path / "in"), str(tmp_path / "out"), ("torch==2.12.1",), "3.11", cuda=True)
    listing = {part: sorted(os.listdir(tmp_path / "out" / part)) for part in ("cuda", "framework", "user")}
    assert listing == {
        "cuda": ["nvidia_cublas-13.0.2.14-py3-none-any.whl"],
        "framework": ["filelock-3.20.0-py3-none-any.whl", "torch-2.12.1-py3-none-any.whl"],
        "user": ["six-1.16.0-py3-none-any.whl"],
    }


def test_without_a_lock_there_is_no_cuda_layer(matrix: Matrix, tmp_path: Path) -> None:
    spec = load_spec(str(write_spec(tmp_path)))
    files = render_files(build_plan(matrix, spec, spec.targets[0]))
    assert "requirements-cuda.txt" not in files and "requirements-cuda" not in files["Dockerfile"].decode()
