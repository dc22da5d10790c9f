"""Programs that run inside built images, with only the standard library and the framework.

Each framework's program shares code with the others through `_common.py`; `program()` assembles the
single standalone file that is copied into an image (or run on a host by `envbuild smoke`).
"""

from __future__ import annotations

import os

FRAMEWORKS = ("torch", "tensorflow", "jax")
_HERE = os.path.dirname(os.path.realpath(__file__))
_INCLUDE = "from envbuild.smoke._common import *"
_SHARED_MARK = "# --- shared code starts here"


def _read(name: str) -> str:
    with open(os.path.join(_HERE, name), encoding="utf-8") as handle:
        return handle.read()


def program(framework: str) -> bytes:
    """The standalone smoke program for a framework: its file with the shared code inlined."""
    body = _read(f"{framework}_smoke.py")
    common = _read("_common.py")
    shared = common[common.index("\n", common.index(_SHARED_MARK)) + 1 :]
    head, _, tail = body.partition(_INCLUDE)
    if not tail:
        raise RuntimeError(f"{framework}_smoke.py does not include the shared code")
    imports = common[common.index("import time") : common.index(_SHARED_MARK)]
    assembled = head + "# Shared code (envbuild/smoke/_common.py), inlined so this file stands alone.\n"
    assembled += imports + shared + tail[tail.index("\n") + 1 :]
    return assembled.encode()

# TEMPORARY until the smoke-programs branch lands
DEFAULT_STEPS = 20
DEFAULT_PRECISION = "fp32"
DEFAULT_TIMEOUT_S = 600
PRECISIONS = ("fp32", "fp16", "bf16")
