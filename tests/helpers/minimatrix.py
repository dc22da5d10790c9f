"""A small hand-written matrix whose answers can be worked out on paper.

Bundled-matrix tests check the real data; these check the rules, independent of data updates.
"""

from __future__ import annotations

from pathlib import Path

SRC = 'source = "https://example.org/primary"'

DRIVERS = f"""
[[cuda]]
version = "11.8.0"
label = "CUDA 11.8 GA"
ga = true
min_driver = "520.61.05"
{SRC}

[[cuda]]
version = "12.0.0"
label = "CUDA 12.0 GA"
ga = true
min_driver = "525.60.13"
{SRC}

[[cuda]]
version = "12.4.0"
label = "CUDA 12.4 GA"
ga = true
min_driver = "550.54.14"
{SRC}

[[cuda]]
version = "12.4.1"
label = "CUDA 12.4 Update 1"
min_driver = "550.54.15"
{SRC}

[[cuda]]
version = "12.6.0"
label = "CUDA 12.6 GA"
ga = true
min_driver = "560.28.03"
{SRC}

[[cuda]]
version = "12.8.0"
label = "CUDA 12.8 GA"
ga = true
min_driver = "570.26"
{SRC}

[[cuda]]
version = "13.0.0"
label = "CUDA 13.0 GA"
ga = true
min_driver = "580.65.06"
{SRC}

[[minor_compat]]
cuda_major = 11
min_driver = "450.80.02"
{SRC}

[[minor_compat]]
cuda_major = 12
min_driver = "525.60.13"
{SRC}

[[minor_compat]]
cuda_major = 13
min_driver = "580.65.06"
{SRC}

[[branch]]
branch = 470
native_cuda = "11.4"
type = "LTSB"
{SRC}

[[branch]]
branch = 525
native_cuda = "12.0"
type = "PB"
{SRC}

[[branch]]
branch = 550
native_cuda = "12.4"
type = "PB"
{SRC}

[[branch]]
branch = 560
native_cuda = "12.6"
type = "PB"
confidence = "disputed"
note = "PB or NFB"
{SRC}

[[branch]]
branch = 570
native_cuda = "12.8"
type = "PB"
{SRC}

[[branch]]
branch = 580
native_cuda = "13.0"
type = "LTSB"
{SRC}
"""

CUDA = f"""
[[cudnn]]
version = "9.1"
cuda = ["11.8-11.8", "12.0-12.4"]
{SRC}

[[image]]
cuda = "12.4.1"
os = ["ubuntu22.04"]
cudnn_os = ["ubuntu22.04"]
cudnn_tag = "cudnn"
platforms = ["linux/amd64", "linux/arm64"]
{SRC}
"""

GPUS = f"""
[[gpu]]
name = "L4"
aliases = ["nvidia l4"]
compute_capability = "8.9"
architecture = "Ada"
segment = "data-center"
first_cuda = "11.8"
data_center = true
{SRC}

[[gpu]]
name = "H100"
aliases = ["h100 sxm"]
compute_capability = "9.0"
architecture = "Hopper"
segment = "data-center"
first_cuda = "11.8"
data_center = true
{SRC}

[[gpu]]
name = "RTX 5090"
aliases = ["geforce rtx 5090"]
compute_capability = "12.0"
architecture = "Blackwell"
segment = "geforce"
first_cuda = "12.8"
{SRC}

[[gpu]]
name = "K80"
compute_capability = "3.7"
architecture = "Kepler"
segment = "data-center"
first_cuda = "6.0"
data_center = true
max_driver_branch = 470
confidence = "secondary"
{SRC}
"""

OSES = f"""
[[os]]
name = "ubuntu22.04"
image = "ubuntu:22.04"
family = "ubuntu"
python = "3.10"
glibc = "2.35"
{SRC}

[[os]]
name = "debian12"
image = "debian:bookworm-slim"
family = "debian"
python = "3.11"
glibc = "2.36"
{SRC}
"""

# "fw": fixed-CUDA builds; 2.0 is newest but needs CUDA 12.6 or 13.0.
FW = f"""
[framework]
name = "fw"
display_name = "Framework"
package = "fw"
aliases = ["framework"]
platforms = ["linux/amd64"]
{SRC}

[[release]]
versions = ["2.0.0"]
python = ["3.11", "3.12"]
pypi_variant = "cu130"
{SRC}

  [[release.variant]]
  name = "cu126"
  cuda = "12.6"
  index_url = "https://example.org/cu126"
  cuda_from = "wheels"
  arch = "8.0;9.0;12.0"
  {SRC}

  [[release.variant]]
  name = "cu130"
  cuda = "13.0"
  index_url = "https://example.org/cu130"
  cuda_from = "wheels"
  arch = "8.0;9.0;12.0+PTX"
  {SRC}

[[release]]
versions = ["1.0.0", "1.0.1"]
python = ["3.10", "3.11"]
{SRC}

  [[release.variant]]
  name = "cu118"
  cuda = "11.8"
  index_url = "https://example.org/cu118"
  cuda_from = "wheels"
  arch = "8.0;8.6"
  {SRC}

  [[release.variant]]
  name = "cu124"
  cuda = "12.4"
  index_url = "https://example.org/cu124"
  cuda_from = "wheels"
  arch = "8.0;9.0+PTX"
  confidence = "unconfirmed"
  note = "arch list assumed"
  {SRC}
"""

# "ranged": a build that takes any CUDA 12.x >= 12.0 from open-ranged wheels.
RANGED = f"""
[framework]
name = "ranged"
display_name = "Ranged"
package = "ranged"
platforms = ["linux/amd64"]
{SRC}

[[release]]
versions = ["0.5.0"]
python = ["3.12"]
{SRC}

  [[release.variant]]
  name = "cuda12"
  cuda_min = "12.0"
  index_url = "https://pypi.org/simple"
  extra = "cuda12"
  cuda_from = "wheels"
  arch = "sm_80,compute_90"
  {SRC}
"""


def write_minimatrix(root: Path) -> Path:
    (root / "frameworks").mkdir(parents=True)
    (root / "drivers.toml").write_text(DRIVERS)
    (root / "cuda.toml").write_text(CUDA)
    (root / "gpus.toml").write_text(GPUS)
    (root / "os.toml").write_text(OSES)
    (root / "frameworks" / "fw.toml").write_text(FW)
    (root / "frameworks" / "ranged.toml").write_text(RANGED)
    return root


# a wheel URL of the form requirements.toml cites (the rules never fetch it)
WHEEL = "https://example.org/ranged_cuda12_plugin-0.5.0-py3-none-manylinux_2_27_x86_64.whl#sha256=" + "0" * 64


def requirement_row(framework: str, version: str, variant: str, requires: dict[str, str]) -> str:
    """One requirements.toml [[build]] row, as `matrix refresh --requirements` writes it."""
    lines = "".join(f'  "{name}" = "{spec}"\n' for name, spec in requires.items())
    return (
        f'[[build]]\nframework = "{framework}"\nversion = "{version}"\nvariant = "{variant}"\n'
        f'wheel = "{framework}-plugin"\nextra = "with-cuda"\nsource = "{WHEEL}"\n'
        f"  [build.requires]\n{lines}\n"
    )


def write_requirements(root: Path, *rows: str) -> Path:
    """Give a mini matrix a requirements.toml (the default mini matrix has none: not measured)."""
    (root / "requirements.toml").write_text("".join(rows))
    return root


def run(matrix, **kwargs):
    """resolve() for build_query(matrix, **kwargs): the query as the command line would build it."""
    from envbuild.resolve.query import build_query
    from envbuild.resolve.solver import resolve

    return resolve(matrix, build_query(matrix, **kwargs))


def labels(resolution) -> list[str]:
    """The stacks of a resolution as pip spells them, best first."""
    from envbuild.resolve.solver import candidate_label

    return [candidate_label(s.framework, s.release, s.variant) for s in resolution.stacks]
