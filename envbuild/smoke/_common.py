"""Code shared by the three smoke programs.

A smoke program runs inside an image where envbuild is not installed, so it must be one standalone
file: `envbuild.smoke.program()` replaces each program's `from envbuild.smoke._common import *` line
with the code below this module's header. Keep it to the standard library and Python 3.8.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402

# --- shared code starts here (everything above stays out of the assembled program)
GATES = ("arguments", "import", "device", "placement", "training", "precision")
DEVICES = ("auto", "gpu", "cpu")
DEVICE_ALIASES = {"cuda": "gpu"}
PRECISIONS = ("fp32", "fp16", "bf16")
PRECISION_ALIASES = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
MAX_STEPS = 100_000
LOSSES_KEPT = 100
USAGE_HINT = (
    "usage: smoke.py [--device auto|gpu|cpu] [--steps N>=1] [--precision fp32|fp16|bf16], "
    "or ENVBUILD_SMOKE_DEVICE / ENVBUILD_SMOKE_STEPS / ENVBUILD_SMOKE_PRECISION"
)
OVERFLOW_HINT = (
    "fp16 gradients overflowed and the loss scaler skipped the updates: "
    "start from a lower loss scale, or use bf16"
)
NO_GPU_HINT = "no GPU visible: check nvidia-smi, run with --gpus all, and that the framework build has CUDA"


# --------------------------------------------------------------------------------------------------
# Common part (the same in the three smoke programs, which must stay standalone).


class _ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and exit 2: the report must come out instead
        raise _ArgumentError(message)


def _env_default(name, fallback):
    value = os.environ.get(name, "").strip()
    return value if value else fallback


def parse_args(argv, framework):
    """Return (device, steps, precision) or raise _ArgumentError with a one-line reason."""
    parser = _Parser(prog="smoke.py", description="envbuild smoke training step (%s)." % framework)
    parser.add_argument("--device", default=_env_default("ENVBUILD_SMOKE_DEVICE", "auto"),
                        help="auto (GPU when the framework sees one), gpu or cpu")
    parser.add_argument("--steps", default=_env_default("ENVBUILD_SMOKE_STEPS", "20"),
                        help="training steps (default 20)")
    parser.add_argument("--precision", default=_env_default("ENVBUILD_SMOKE_PRECISION", "fp32"),
                        help="fp32, fp16 or bf16")
    args = parser.parse_args(argv)
    device = str(args.device).strip().lower()
    device = DEVICE_ALIASES.get(device, device)
    if device not in DEVICES:
        raise _ArgumentError("--device %r is not one of %s" % (args.device, "|".join(DEVICES)))
    precision = str(args.precision).strip().lower()
    precision = PRECISION_ALIASES.get(precision, precision)
    if precision not in PRECISIONS:
        raise _ArgumentError("--precision %r is not one of %s" % (args.precision, "|".join(PRECISIONS)))
    try:
        steps = int(str(args.steps).strip())
    except ValueError:
        raise _ArgumentError("--steps %r is not an integer" % (args.steps,)) from None
    if not 1 <= steps <= MAX_STEPS:
        raise _ArgumentError("--steps %d is outside 1..%d" % (steps, MAX_STEPS))
    return device, steps, precision


def new_report(framework, device, steps, precision):
    return {
        "framework": framework,
        "framework_version": None,
        "python": platform.python_version(),
        "device_requested": device,
        "device_used": None,
        "framework_device": None,
        "devices": [],
        "cuda_runtime": None,
        "cudnn": None,
        "nccl": None,
        "precision": precision,
        "precision_effective": None,
        "steps": steps,
        "losses": [],
        "losses_truncated": False,
        "loss_first": None,
        "loss_last": None,
        "loss_decreased": None,
        "placement_ok": None,
        "duration_s": None,
        "timings_s": {},
        "passed": False,
        "gates": {gate: "skipped" for gate in GATES},
        "failed": [],
        "notes": [],
    }


def fail(report, gate, detail, hint):
    detail = " ".join(str(detail).split()) or "(no detail)"
    if len(detail) > 2000:
        detail = detail[:2000] + "..."
    report["failed"].append({"gate": gate, "detail": detail, "hint": hint})
    report["gates"][gate] = "failed"


def passed(report, gate):
    if report["gates"].get(gate) != "failed":
        report["gates"][gate] = "passed"


def describe_exception(exc):
    return "%s: %s" % (type(exc).__name__, exc)


def cpu_device_entry():
    name = platform.processor() or platform.machine() or "cpu"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    entry = {"name": name, "kind": "cpu", "cores": os.cpu_count()}
    try:
        entry["memory_total_bytes"] = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        pass
    return entry


def nvidia_device_nodes():
    return sorted(glob.glob("/dev/nvidia[0-9]*"))


def no_gpu_detail(framework_says):
    nodes = nvidia_device_nodes()
    if nodes:
        where = "%s exist(s), so the container has a GPU but the framework cannot use it" % ", ".join(nodes)
    else:
        where = "no /dev/nvidia* device node in this container"
    return "--device gpu but %s; %s" % (framework_says, where)


def _json_safe(value):
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def round_loss(value):
    value = float(value)
    if not math.isfinite(value):
        return value
    return float("%.6g" % value)


def record_losses(report, losses, final_loss):
    """losses: the per-step training losses (before each update); final_loss: after the last update."""
    kept = [round_loss(v) for v in losses]
    if len(kept) > LOSSES_KEPT:
        half = LOSSES_KEPT // 2
        kept = kept[:half] + kept[-half:]
        report["losses_truncated"] = True
    report["losses"] = kept
    report["loss_first"] = round_loss(losses[0]) if losses else None
    report["loss_last"] = round_loss(final_loss) if final_loss is not None else None


def check_losses(report, losses, final_loss, not_decreasing_hint):
    everything = [*list(losses), final_loss]
    bad = [i for i, v in enumerate(everything) if v is None or not math.isfinite(v)]
    if bad:
        report["loss_decreased"] = False
        where = "after the last update" if bad[0] == len(losses) else "at step %d" % (bad[0] + 1)
        fail(report, "training", "loss is not finite %s (%r)" % (where, everything[bad[0]]),
             "loss became NaN/Inf: lower the learning rate or use fp32/bf16 (fp16 needs loss scaling); "
             "if fp32 also fails, suspect the GPU build or driver")
        return
    decreased = final_loss < losses[0]
    report["loss_decreased"] = bool(decreased)
    if not decreased:
        detail = "loss did not decrease: first %.6g, after %d step(s) %.6g" % (
            losses[0], len(losses), final_loss)
        fail(report, "training", detail, not_decreasing_hint)


def emit(report):
    report["duration_s"] = round(time.perf_counter() - _T0, 3)
    report["passed"] = not report["failed"]
    sys.stdout.flush()
    sys.stdout.write(json.dumps(_json_safe(report), sort_keys=False, allow_nan=False) + "\n")
    sys.stdout.flush()
    return 0 if report["passed"] else 1


