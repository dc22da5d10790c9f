"""Two projects whose locks differ only in the framework's patch release, for the CUDA-layer test
(tests/engine/test_cuda_layer.py) and bench/layers.py.

The framework is a stand-in `torch` at 2.12.0 and 2.12.1 (one [[release]] row of the bundled matrix:
the PyPI cu130 build), a small wheel made here, which depends on real CUDA 13.0 wheels from PyPI:
nvidia-cuda-runtime 13.0.96 (2.2 MB) and nvidia-nvtx 13.0.85 (0.15 MB). The real torch's CUDA wheels
are gigabytes; what this shows, the CUDA layer's digest surviving a framework patch release, does
not depend on their size. `envbuild lock` resolves both projects against a loopback index holding
these wheels, so the locks carry their real hashes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from envbuild._testing.pyindex import TARGET_WHEELS, build_wheel, download_uv_for_target

CUDA_WHEELS = ("nvidia-cuda-runtime==13.0.96", "nvidia-nvtx==13.0.85")
FRAMEWORK_VERSIONS = ("2.12.0", "2.12.1")
SPEC = """[stack]
driver = "580"
framework = "torch=={version}"
python = "3.11"
os = "debian12"
strategy = "wheels"

[packages]
framework-index-url = "{index}"

[image]
repository = "envbuild-test/cuda-layer"
"""


def cuda_wheelhouse(directory: Path) -> Path:
    """The CUDA wheels (pip download, manylinux x86_64, CPython 3.11), the stand-in torch at both
    patch releases requiring exactly those wheels, and uv's wheel for the images' installer."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            *CUDA_WHEELS,
            *TARGET_WHEELS,
            "--platform",
            "manylinux_2_17_x86_64",
            "--platform",
            "manylinux_2_5_x86_64",
            "-d",
            str(directory),
        ],
        check=True,
    )
    for version in FRAMEWORK_VERSIONS:
        build_wheel(directory, "torch", version, list(CUDA_WHEELS))
    return download_uv_for_target(directory)


def lock_and_render(
    project: Path, version: str, index_url: str, wheelhouse: Path, base: str
) -> tuple[int, Path]:
    """`envbuild lock` then `envbuild render --wheelhouse` the project at torch `version`: (the first
    non-zero exit code or 0, the build context)."""
    from envbuild.cli.app import main

    project.mkdir(parents=True, exist_ok=True)
    spec = project / "envbuild.toml"
    spec.write_text(SPEC.format(version=version, index=index_url))
    code = main(["lock", "-f", str(spec), "--base-image", base])
    if code == 0:
        code = main(
            [
                "render",
                "-f",
                str(spec),
                "-o",
                str(project / "out"),
                "--wheelhouse",
                str(wheelhouse),
                "--base-image",
                base,
            ]
        )
    return code, project / "out" / "default"


def layers_through(dockerfile: str, marker: str, base_layers: int) -> int:
    """How many of an image's layers come from its base and the Dockerfile up to the instruction
    containing `marker` (RUN and COPY each add one; ENV, ARG, LABEL and USER add none)."""
    head = dockerfile[: dockerfile.index(marker)]
    instructions = [line for line in head.splitlines() if line.startswith(("RUN ", "COPY "))]
    return base_layers + len(instructions)
