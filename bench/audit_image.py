"""What auditing a local image costs three ways, measured in one run on the same image (issue 32).

- **docker save** (the baseline, and what every audit of a local image did before): the Engine streams
  every layer of the image, and cuobjdump reads every shared object.
- **storage**: each layer read from the Engine's overlay2 directory (envbuild.image.storage), which
  needs this process on the Engine's host with read access to its data root (root).
- **warm**: every layer's facts from the per-layer cache, as the audit of a rebuild whose layers were
  all seen before (a rebuild after a user package changed reads only that layer on top of this).

Each way starts from an empty cache of its own, and the three answers must be the same audit.
The image defaults to the real torch 2.6.0 cu124 image tests/engine/test_cuda_image.py pushes; any
local image with CUDA libraries serves.

Run: `.venv/bin/python bench/audit_image.py [IMAGE]` (as root, beside dockerd)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild.audit.report import to_json  # noqa: E402
from envbuild.image.filesystem import audit_image_layers  # noqa: E402
from envbuild.matrix.load import load_matrix  # noqa: E402
from envbuild.resolve.query import parse_gpu  # noqa: E402

DEFAULT_IMAGE = "127.0.0.1:5000/envbuild-test/cuda-e2e:e2e"


def _timed(image: str, gpus: tuple, cache: str, read: str | None) -> tuple[float, str, object]:
    os.environ["ENVBUILD_CACHE_DIR"] = cache
    if read:
        os.environ["ENVBUILD_AUDIT_READ"] = read
    else:
        os.environ.pop("ENVBUILD_AUDIT_READ", None)
    started = time.perf_counter()
    audit, layers = audit_image_layers(image, gpus, "torch")
    return time.perf_counter() - started, to_json(audit), layers


def main() -> int:
    image = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_IMAGE
    gpus = tuple(parse_gpu(name, load_matrix()) for name in ("H100", "A100"))
    with tempfile.TemporaryDirectory() as saved_cache, tempfile.TemporaryDirectory() as storage_cache:
        saved_s, saved, saved_layers = _timed(image, gpus, saved_cache, "save")
        storage_s, stored, storage_layers = _timed(image, gpus, storage_cache, None)
        warm_s, warm, warm_layers = _timed(image, gpus, storage_cache, None)
    if not saved == stored == warm:
        print("the three reads gave different audits", file=sys.stderr)
        return 1
    print(f"image {image}: {saved_layers.total} layers")
    print(
        f"  docker save, cold cache: {saved_s:7.2f} s  ({saved_layers.source}, "
        f"{saved_layers.read} layers read)"
    )
    print(
        f"  storage, cold cache:     {storage_s:7.2f} s  ({storage_layers.source}, "
        f"{storage_layers.read} layers read)  {saved_s / storage_s:6.1f}x faster than docker save"
    )
    print(
        f"  warm cache:              {warm_s:7.2f} s  ({warm_layers.source}, {warm_layers.read} layers read)"
        f"  {saved_s / warm_s:6.1f}x faster than docker save"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
