"""The nvidia/cuda tag scheme, written and read in one place: X.Y.Z-[cudnnN-]{base|runtime|devel}-OS.

plan/plan.py writes these tags into FROM lines, the lifecycle checks read them back from locks, and the
refresh compares them with the registry's tag list; all three must agree on the spelling.
"""

from __future__ import annotations

import re

from envbuild._util.record import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from envbuild.matrix.model import Image

KINDS = ("base", "runtime", "devel")
CUDNN_KINDS = ("runtime", "devel")  # NVIDIA ships no cudnn-base flavor
_TAG_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)-((?:cudnn\d*-)?(?:base|runtime|devel))-([a-z]+[0-9][0-9.]*)$")


def cuda_tag(cuda: tuple[int, int, int], cudnn: str | None, kind: str, os_name: str) -> str:
    """(12, 4, 1), "cudnn", "runtime", "ubuntu22.04" -> "12.4.1-cudnn-runtime-ubuntu22.04"."""
    version = ".".join(map(str, cuda))
    return f"{version}-{cudnn}-{kind}-{os_name}" if cudnn else f"{version}-{kind}-{os_name}"


class CudaTag(Record):
    """An nvidia/cuda tag split into its parts: 12.4.1-cudnn-runtime-ubuntu22.04."""

    __slots__ = ("cuda", "cudnn", "kind", "os")
    cuda: tuple[int, int, int]
    cudnn: str | None  # "cudnn8", "cudnn9", "cudnn" or None
    kind: str  # base | runtime | devel
    os: str

    def with_release(self, image: Image) -> str:
        """The same flavor and OS from another release row (its cuDNN tag spelling)."""
        return cuda_tag(image.cuda, (image.cudnn_tag or "cudnn") if self.cudnn else None, self.kind, self.os)


def parse_cuda_tag(tag: str) -> CudaTag | None:
    match = _TAG_RE.match(tag)
    if not match:
        return None
    cudnn, _, kind = match.group(4).rpartition("-")
    return CudaTag(
        cuda=tuple(int(match.group(i)) for i in (1, 2, 3)), cudnn=cudnn or None, kind=kind, os=match.group(5)
    )
