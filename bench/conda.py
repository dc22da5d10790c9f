"""What locking the conda layer costs: rattler's in-process solve against a conda channel on loopback.

The jax-conda example (strategy conda: jax/jaxlib with a cuda<major>* build, optax from [packages]
conda) is locked, whole process, against a loopback channel holding the packages its plan asks for
(envbuild._testing.condachannel.stack_channel): cold (an empty rattler repodata cache) and warm, then
`lock --check` (re-solve and compare) and `lock --check --offline` (seal and drift only). The
baseline, measured in the same run, is `lock --check --offline` of that lock: the same process, spec,
matrix and lock read with no solve at all, so the difference is what solving the conda layer (and the
one-package pip layer) costs. conda-forge's repodata is far larger than the loopback channel's, so absolute
solve times there are higher; the ratio between cold and warm is the figure that carries over.

Target: a warm conda lock within 2 s of that baseline. Run:
`.venv/bin/python bench/conda.py`
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._testing.condachannel import stack_channel  # noqa: E402
from envbuild._testing.pyindex import PackageIndex, build_wheel  # noqa: E402
from envbuild.matrix.load import load_matrix  # noqa: E402
from envbuild.plan.plan import build_plan  # noqa: E402
from envbuild.spec.model import load_spec  # noqa: E402

ENVBUILD = str(Path(sys.executable).with_name("envbuild"))
TARGET_EXTRA_S = 2.0


def spec_text(channel: str, index: str) -> str:
    text = (REPO / "examples" / "jax-conda" / "envbuild.toml").read_text()
    text = text.replace('pip = ["einops==0.8.1"]', f'pip = ["einops==0.8.1"]\nindex-url = "{index}"')
    return text.replace('conda = ["optax"]', f'conda = ["app"]\nconda-channels = ["{channel}"]')


# a base pinned by digest: nothing is pulled, and the lock needs no registry (as bench/lock.py)
BASE = ["--base-image", "mambaorg/micromamba:2.6.1@sha256:" + "a" * 64]


def timed(*args: str, env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    extra = BASE if args[:1] == ("lock",) else []
    done = subprocess.run([ENVBUILD, *args, *extra], cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"envbuild {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="envbuild-bench-conda-") as scratch:
        root = Path(scratch)
        wheels = root / "wheels"
        wheels.mkdir()
        build_wheel(wheels, "einops", "0.8.1")
        project = root / "project"
        project.mkdir()
        (project / "envbuild.toml").write_text(spec_text("http://127.0.0.1:1", "http://127.0.0.1:1/simple"))
        spec = load_spec(str(project / "envbuild.toml"))
        plan = build_plan(load_matrix(), spec, spec.targets[0])
        channel = stack_channel(root / "channel", plan.conda_framework, python=plan.python)
        channel.index()
        with channel, PackageIndex(wheels) as index:
            (project / "envbuild.toml").write_text(spec_text(channel.url, index.url))
            env = {**os.environ, "ENVBUILD_CACHE_DIR": str(root / "cache"), "UV_CACHE_DIR": str(root / "uv")}
            cold = timed("lock", env=env, cwd=project)
            (project / "envbuild.lock").unlink()
            warm = timed("lock", env=env, cwd=project)
            check = timed("lock", "--check", env=env, cwd=project)
            offline = timed("lock", "--check", "--offline", env=env, cwd=project)
            packages = (project / "envbuild.lock").read_text().count("[[target.conda]]")
        shutil.rmtree(root / "cache", ignore_errors=True)
    print(f"envbuild lock, the jax-conda example, {packages} conda packages from a loopback channel")
    baseline = offline
    print(f"  conda lock, cold rattler cache                  {cold * 1000:8.0f} ms")
    print(
        f"  conda lock, warm                                {warm * 1000:8.0f} ms   "
        f"{warm / baseline:.2f}x the baseline"
    )
    print(f"  lock --check (re-solve)                         {check * 1000:8.0f} ms")
    print(f"  baseline: lock --check --offline (no solve)     {offline * 1000:8.0f} ms")
    ok = warm - baseline < TARGET_EXTRA_S
    print(
        f"target: solving adds under {TARGET_EXTRA_S:.0f} s to the baseline: "
        f"{'met' if ok else 'MISSED'} (+{(warm - baseline) * 1000:.0f} ms)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
