"""Which floating-point formats a compute capability computes in, from NVIDIA's programming guide.

The smoke step trains in the spec's `[smoke] precision`; a GPU without that format cannot run it, so
resolve and render warn and the verify job on such a GPU uses a format it has. A gpus.toml row may
state `bf16`/`fp16`; a row that does not gets these, and `matrix check` refuses a row that disagrees.
Source: https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html
(half-precision arithmetic from 5.3; bfloat16 from 8.0).
"""

from __future__ import annotations

# 5.3 (Jetson TX1), 6.0 (P100), 6.2 (TX2) and every capability from 7.0 have fp16 arithmetic; 6.1
# (Pascal GeForce, P4/P40) has it at 1/64 of the fp32 rate, which trains, slowly: counted as present.
_NO_FP16 = {(3, 5), (3, 7), (5, 0), (5, 2)}


def has_bf16(cc: tuple[int, int]) -> bool:
    return cc >= (8, 0)


def has_fp16(cc: tuple[int, int]) -> bool:
    return cc not in _NO_FP16 and cc >= (5, 3)
