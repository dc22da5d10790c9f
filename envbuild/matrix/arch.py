"""Compiled GPU architectures of a framework build, and whether they cover a GPU.

This is the check behind "no kernel image is available for execution on the device": a build runs
on compute capability X.Y when it carries SASS for X.Y, or SASS for a lower X.Z of the same major
(cubins run on later minors of their major), or PTX for an arch <= X.Y that the driver can JIT.
PTX JIT needs a driver at least as new as the PTX, so it does not count under minor-version
compatibility.
"""

from __future__ import annotations

from envbuild.matrix.versions import format_cc, parse_compute_capability
from envbuild.preflight.programs.envbuild_preflight import covers


class ArchList:
    __slots__ = ("ptx", "sass", "text")

    def __init__(self, text: str, sass: frozenset[tuple[int, int]], ptx: frozenset[tuple[int, int]]):
        self.text = text
        self.sass = sass
        self.ptx = ptx

    def covers(self, cc: tuple[int, int], *, allow_ptx: bool = True) -> str | None:
        """How the build runs on ``cc``: "sass", "ptx", or None when it has no kernel image (the
        preflight guard's rule, so an image judges a node as resolve judged the GPU)."""
        return covers(self.sass, self.ptx, cc, allow_ptx=allow_ptx)

    def describe(self) -> str:
        parts = [format_cc(cc) for cc in sorted(self.sass)]
        parts += [f"{format_cc(cc)}+PTX" for cc in sorted(self.ptx)]
        return ";".join(parts)


def parse_arch_list(text: str) -> ArchList:
    """Read ``5.0;8.6;9.0+PTX`` (TORCH_CUDA_ARCH_LIST) or ``sm_80,sm_90,compute_90`` (nvcc) notation.

    In TORCH_CUDA_ARCH_LIST notation ``9.0+PTX`` means SASS and PTX for 9.0; in nvcc notation
    ``compute_90`` alone means PTX only.
    """
    sass: set[tuple[int, int]] = set()
    ptx: set[tuple[int, int]] = set()
    items = [item.strip() for item in text.replace(",", ";").replace(" ", ";").split(";")]
    items = [item for item in items if item]
    if not items:
        raise ValueError("empty arch list")
    for item in items:
        lowered = item.lower()
        with_ptx = lowered.endswith("+ptx")
        core = item[:-4] if with_ptx else item
        cc = parse_compute_capability(core)
        if cc is None:
            raise ValueError(f"{item!r} is not an arch (write 8.6, 9.0+PTX, sm_86 or compute_90)")
        if lowered.startswith("compute"):
            ptx.add(cc)
            continue
        sass.add(cc)
        if with_ptx:
            ptx.add(cc)
    return ArchList(text, frozenset(sass), frozenset(ptx))
