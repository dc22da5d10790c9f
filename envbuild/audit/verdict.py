"""What a GPU gets from a library's kernels: the four answers the CUDA runtime gives at launch.

- native: SASS for exactly the GPU's compute capability;
- same-major: SASS of a lower minor of the same major (SASS runs on later minors of its major; an
  `a`-suffixed entry runs only on its exact capability, an `f` entry on its family of the same major);
- ptx-only: no SASS that runs, but PTX of a capability <= the GPU's: the driver JIT-compiles it at the
  first launch (slow once, and it needs a driver at least as new as the PTX);
- no-kernel-image: none of these, and the GPU fails with "no kernel image is available for execution
  on the device".
"""

from __future__ import annotations

import re

NATIVE, SAME_MAJOR, PTX_ONLY, NO_KERNEL = "native", "same-major", "ptx-only", "no-kernel-image"
RUNS = (NATIVE, SAME_MAJOR, PTX_ONLY)
NO_KERNEL_MESSAGE = "no kernel image is available for execution on the device"
_ARCH_RE = re.compile(r"^(sm|compute)_(\d+?)(\d)([af]?)$")


def split_arch(arch: str) -> tuple[tuple[int, int], str]:
    """ "sm_90a" -> ((9, 0), "a"); "compute_120" -> ((12, 0), "")."""
    match = _ARCH_RE.match(arch)
    if match is None:
        raise ValueError(f"not an architecture: {arch!r}")
    return (int(match.group(2)), int(match.group(3))), match.group(4)


def judge(sass: tuple[str, ...], ptx: tuple[str, ...], cc: tuple[int, int]) -> str:
    best = NO_KERNEL
    for arch in sass:
        have, suffix = split_arch(arch)
        if have == cc:
            return NATIVE
        if suffix != "a" and have[0] == cc[0] and have[1] < cc[1]:
            best = SAME_MAJOR
    if best == NO_KERNEL and any(split_arch(arch)[0] <= cc and not split_arch(arch)[1] for arch in ptx):
        best = PTX_ONLY
    return best
