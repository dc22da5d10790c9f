"""`envbuild init`: a commented starter envbuild.toml that renders as written."""

from __future__ import annotations

import os

from envbuild._util.files import write_atomic
from envbuild.errors import UsageError

STARTER_TEMPLATE = """\
# envbuild.toml: describe the environment once; `envbuild resolve`, `render` and `build` read it.
# Every key is optional unless marked required. Docs: the docs site's reference/envbuild-toml page.

[stack]
{driver_line}
framework = "torch"            # required: torch, tensorflow or jax, optionally "torch==2.5.*"
{gpus_line}
# python = "3.10"              # default: the OS's own python3 (conda: the newest the build supports)
# python-source = "deadsnakes" # opt in to the deadsnakes PPA for a python the OS lacks (Ubuntu only)
# cuda = ">=12.1"              # constrain the CUDA runtime
# compat = "native"            # or "minor": allow newer CUDA minors through minor-version compatibility
strategy = "wheels"            # wheels | base-image (nvidia/cuda + cuDNN) | conda (micromamba + conda-forge)
os = "ubuntu22.04"             # base OS: ubuntu20.04, ubuntu22.04, ubuntu24.04, debian11, debian12, debian13

[packages]
pip = []                       # PEP 508 requirements, e.g. ["numpy>=1.26", "transformers==4.44.2"]
apt = []                       # Debian/Ubuntu package names, e.g. ["libgl1"]
# conda = []                   # conda match specs (strategy conda)
# index-url = "https://pypi.org/simple"
# extra-index-urls = []
# framework-index-url = "https://mirror.example/whl/cu124"   # a mirror of the framework variant's index

[image]
repository = "envbuild/train"
# tags = ["{{target}}-{{framework}}{{framework_version}}-cuda{{cuda}}-py{{python}}"]
# user = "envbuild"            # images run as this non-root user
# labels = {{ "org.opencontainers.image.source" = "https://github.com/acme/train" }}
# env = {{ PYTORCH_CUDA_ALLOC_CONF = "expandable_segments:True" }}
# devel = false                # base-image: compile user packages in a CUDA devel stage
# installer = "uv"             # uv | pip (pip for bases uv cannot run on: musl, glibc < 2.17)

[smoke]
device = "gpu"                 # gpu | cpu (CPU-only CI; such images are never promoted as GPU-verified)
steps = 20
precision = "bf16"             # fp32 | fp16 | bf16
timeout = 600                  # seconds
# imports = ["transformers"]   # your checks, run in the image after the training steps
# command = "python -m myproject.selftest"   # (one command, no shell: docs/smoke-checks.md)

# One spec, several images: each [[target]] overrides [stack] keys.
# [[target]]
# name = "h100"
# gpus = ["H100"]
"""


COMMENT_COLUMN = 31  # where the template's comments start, so a filled-in line lines up with them


def with_comment(code: str, comment: str) -> str:
    """`code`, then `comment` at the template's comment column, or two spaces after a line too long
    to reach it (a long `gpus = [...]` ran into its comment: `gpus = [...]# every GPU`)."""
    return code + " " * max(COMMENT_COLUMN - len(code), 2) + comment


def starter_text(driver: str, gpus: tuple[str, ...] = ()) -> str:
    """The starter for this driver and these GPUs (init takes them from flags or nvidia-smi)."""
    driver_line = with_comment(
        f'driver = "{driver}"', "# required: the driver your nodes run (550, R550 or 550.54.15)"
    )
    if gpus:
        listed = ", ".join(f'"{g}"' for g in gpus)
        gpus_line = with_comment(
            f"gpus = [{listed}]", "# every GPU the image must run on (names or 8.9 / sm_89)"
        )
    else:
        gpus_line = '# gpus = ["H100", "L4"]        # every GPU the image must run on (names or 8.9 / sm_89)'
    return STARTER_TEMPLATE.format(driver_line=driver_line, gpus_line=gpus_line)


def write_starter(path: str, text: str, *, force: bool = False) -> str:
    """Write the starter to `path`, a file in a directory that exists.

    A missing parent is refused rather than created: `init -f` with a typo in the directory would
    otherwise leave a spec somewhere nobody looks. `--force` replaces a file, never a directory."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise UsageError(
            f"-f {path}: the folder {parent} {what}",
            fix=f"create it first (mkdir -p {parent}), or pass -f a path in an existing folder",
        )
    if os.path.isdir(path):
        raise UsageError(
            f"-f {path} is a directory; init writes a file and never replaces a directory",
            fix=f"name the file: -f {os.path.join(path, 'envbuild.toml')}",
        )
    if os.path.exists(path) and not force:
        raise UsageError(f"{path} already exists", fix="pass --force to overwrite it, or -f OTHER.toml")
    try:
        write_atomic(path, text)
    except OSError as exc:  # read-only or full filesystem, no permission: the user's to fix
        raise UsageError(
            f"-f {path}: cannot write it ({exc.strerror or exc})",
            fix=f"pick a folder you can write to, or make {parent} writable",
        ) from None
    return path
