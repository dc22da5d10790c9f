"""What a GPU gets from a library's kernels: the four answers the CUDA runtime gives at launch.

- native: SASS for exactly the GPU's compute capability;
- same-major: SASS of a lower minor of the same major (SASS runs on later minors of its major; an
  `a`-suffixed entry runs only on its exact capability, an `f` entry on its family: the same major,
  a minor at least its own);
- ptx-only: no SASS that runs, but PTX the driver can JIT-compile at the first launch (slow once, and
  it needs a driver at least as new as the PTX): plain PTX of a capability <= the GPU's; suffixed PTX
  only inside its own capability (`a`) or family (`f`), never on a later major;
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


def _in_family(have: tuple[int, int], suffix: str, cc: tuple[int, int]) -> bool:
    """Whether code built for `have` (with its suffix) may run on `cc` without being the exact match:
    `a` never; plain and `f` on a later minor of the same major."""
    return suffix != "a" and have[0] == cc[0] and have[1] < cc[1]


def _jits(arch: str, cc: tuple[int, int]) -> bool:
    have, suffix = split_arch(arch)
    if not suffix:
        return have <= cc
    return have == cc or _in_family(have, suffix, cc)


def judge(sass: tuple[str, ...], ptx: tuple[str, ...], cc: tuple[int, int]) -> str:
    """The verdict for a GPU of capability `cc`, from one library's SASS and PTX entries."""
    best = NO_KERNEL
    for arch in sass:
        have, suffix = split_arch(arch)
        if have == cc:
            return NATIVE
        if _in_family(have, suffix, cc):
            best = SAME_MAJOR
    if best == NO_KERNEL and any(_jits(arch, cc) for arch in ptx):
        best = PTX_ONLY
    return best
