"""PyTorch smoke training step, run inside a built image as `python /opt/envbuild/smoke.py`.

    python smoke.py [--device auto|gpu|cpu] [--steps N] [--precision fp32|fp16|bf16]
                    [--import MODULE ...] [--command CMD]

After the training step it runs the user's checks (the checks gate, smoke_common.run_checks): each
--import and the --command, or what smoke_checks.json beside it says (an image's [smoke] imports and
command).

ENVBUILD_SMOKE_DEVICE, ENVBUILD_SMOKE_STEPS and ENVBUILD_SMOKE_PRECISION give the defaults when a flag is
absent (built-in defaults: auto, 20, fp32). The program trains a tiny seeded model (Conv2d, then an MLP)
to fit a fixed random linear map for N steps of forward, backward and optimizer update, and checks the
gates import, device, placement, training and precision. It prints exactly one JSON report as the last
line of stdout and exits 0 only when every gate passed, else 1.

Only the standard library and torch are used: envbuild itself is not installed in the image. Python 3.8+.
ENVBUILD_SMOKE_CPU_FP16=1 keeps fp16 on the CPU instead of falling back to bf16 (for testing the
GradScaler path on a machine without a GPU).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time

# smoke_common.py lies beside this file. Python puts a script's directory first on sys.path, but not
# under `python -I` or PYTHONSAFEPATH=1: put it there for those too.
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import smoke_common as common

FRAMEWORK = "torch"

# --------------------------------------------------------------------------------------------------
# PyTorch part.

N_SAMPLES, CHANNELS, HEIGHT, WIDTH, N_OUT = 64, 3, 8, 8, 4
LEARNING_RATE = 3e-3
ALLREDUCE_TIMEOUT_S = 120
CPU_PLACEMENT_HINT = "model or batch is on the CPU: move both with .to(device)"


def nccl_version(torch):
    nccl = torch.cuda.nccl.version()
    return ".".join(str(part) for part in nccl) if isinstance(nccl, tuple) else str(nccl)


def memory_report(torch, device):
    stats = torch.cuda.memory_stats(device)
    reserved = int(torch.cuda.memory_reserved(device))
    inactive = int(stats.get("inactive_split_bytes.all.current", 0))
    return {
        "max_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
        "reserved_bytes": reserved,
        "inactive_split_bytes": inactive,
        "num_alloc_retries": int(stats.get("num_alloc_retries", 0)),
        "num_ooms": int(stats.get("num_ooms", 0)),
        "fragmentation": round(inactive / reserved, 4) if reserved else 0.0,
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
    }


def check_placement(report, device, model, tensors):
    wrong = [f"parameter {name} on {p.device}" for name, p in model.named_parameters() if p.device != device]
    wrong += [f"{name} on {t.device}" for name, t in tensors if t.device != device]
    first = next(model.parameters())
    report["placement"] = {"parameters": str(first.device), "batch": str(tensors[0][1].device)}
    if device.type != "cpu" and any(" on cpu" in item for item in wrong):
        hint = CPU_PLACEMENT_HINT
    else:
        hint = "model and batch must be on the same device: move both with .to(device)"
    return common.check_placed(report, wrong, device, hint)


def make_grad_scaler(torch, device_type):
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler(device_type, init_scale=2.0**10)
    return torch.cuda.amp.GradScaler(init_scale=2.0**10)


def _allreduce_worker(rank, world, backend, port, queue, hang_rank):
    """One process per device, as torch.distributed wants: rank r contributes r + 1."""
    try:
        import datetime

        import torch
        import torch.distributed as dist

        if rank == hang_rank:  # tests: a rank that never joins, like a hung NCCL peer
            time.sleep(3600)
        dist.init_process_group(
            backend,
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=ALLREDUCE_TIMEOUT_S),
        )
        if backend == "nccl":
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        else:
            device = torch.device("cpu")
        value = torch.full((1,), float(rank + 1), device=device)
        dist.all_reduce(value)
        if rank == 0:
            queue.put(float(value.item()))
        dist.destroy_process_group()
    except Exception as exc:
        queue.put(f"error on rank {rank}: {common.describe_exception(exc)}")


def run_allreduce(world, backend="nccl", timeout=ALLREDUCE_TIMEOUT_S, hang_rank=-1):
    """(sum or error text or None on timeout, seconds) of an all-reduce across `world` processes."""
    import multiprocessing
    import queue as queue_module
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [
        context.Process(
            target=_allreduce_worker, daemon=True, args=(rank, world, backend, port, results, hang_rank)
        )
        for rank in range(world)
    ]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    try:
        value = results.get(timeout=timeout)
    except queue_module.Empty:
        value = None
    seconds = time.perf_counter() - started
    for worker in workers:
        worker.join(2)
        if worker.is_alive():
            worker.terminate()
    return value, seconds


class TorchProgram(common.Program):
    framework = FRAMEWORK
    modules = ("torch",)
    broken_hint = (
        "torch is installed but does not load: reinstall it; check its CUDA libraries match the image"
    )
    fp16_cpu_note = "fp16 autocast is a GPU feature: ran bf16 on the CPU instead"
    training_hints = (
        (
            ("no kernel image", "not compatible"),
            "this GPU's arch is not in torch.cuda.get_arch_list(): install a torch build that has it",
            False,
        ),
        (
            ("out of memory",),
            "CUDA out of memory: free the GPU (nvidia-smi) or set PYTORCH_CUDA_ALLOC_CONF",
            True,
        ),
        (
            ("CUDA", "cuDNN", "CUDNN"),
            "CUDA/cuDNN error: check the driver supports the image's CUDA runtime (nvidia-smi)",
            False,
        ),
    )

    def collect_environment(self, torch, report):
        report["framework_version"] = str(torch.__version__)
        report["cuda_runtime"] = getattr(torch.version, "cuda", None)
        hip = getattr(torch.version, "hip", None)
        if hip:
            report["hip"] = hip
        try:
            report["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception:
            report["arch_list"] = None
        report["compute_capability"] = None
        report["memory"] = None
        if report["cuda_runtime"] or hip:
            common.record_version(
                report,
                "cudnn",
                "cudnn version",
                lambda: common.cudnn_version_string(torch.backends.cudnn.version()),
            )
            common.record_version(report, "nccl", "nccl version", lambda: nccl_version(torch))
        gpus = []
        try:
            if torch.cuda.is_available():
                gpus = list(range(torch.cuda.device_count()))
        except Exception as exc:
            report["notes"].append(f"torch.cuda.is_available() raised {common.describe_exception(exc)}")
        if gpus:
            for index in gpus:
                props = torch.cuda.get_device_properties(index)
                report["devices"].append(
                    {
                        "name": props.name,
                        "kind": "gpu",
                        "compute_capability": f"{props.major}.{props.minor}",
                        "memory_total_bytes": int(props.total_memory),
                    }
                )
        else:
            common.record_cpu_only(
                report, f"torch sees no GPU (torch.version.cuda={report['cuda_runtime']!r})"
            )
        return gpus

    def no_gpu_says(self, report):
        says = "torch.cuda.is_available() is False"
        if not report["cuda_runtime"] and not report.get("hip"):
            says += " and torch.version.cuda is None (a CPU-only build)"
        return says

    def select_device(self, torch, report, gpus, on_gpu):
        device = torch.device("cuda:0") if on_gpu else torch.device("cpu")
        report["device_used"] = str(device) if on_gpu else "cpu"
        report["framework_device"] = str(device)
        return device

    def check_gpu(self, torch, report, device, gpus):
        """Unguarded: an error here is the program's, reported as such. Memory is gated after training."""
        common.check_driver(report)
        capability = torch.cuda.get_device_capability(device.index or 0)
        common.check_arch(report, capability, report.get("arch_list"))

    def train(self, torch, report, device, steps, precision):
        nn = torch.nn
        torch.manual_seed(0)
        if device.type == "cuda":
            torch.cuda.manual_seed_all(0)
            torch.cuda.reset_peak_memory_stats(device)
        torch.backends.cudnn.enabled = True
        torch.backends.cudnn.benchmark = False

        generator = torch.Generator().manual_seed(0)
        features = CHANNELS * HEIGHT * WIDTH
        x_cpu = torch.randn(N_SAMPLES, CHANNELS, HEIGHT, WIDTH, generator=generator)
        target_map = torch.randn(features, N_OUT, generator=generator) / math.sqrt(features)
        y_cpu = x_cpu.flatten(1) @ target_map
        model = nn.Sequential(
            nn.Conv2d(CHANNELS, 8, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(8 * HEIGHT * WIDTH, 32),
            nn.ReLU(),
            nn.Linear(32, N_OUT),
        ).to(device)
        x = x_cpu.to(device)
        y = y_cpu.to(device)
        if not check_placement(report, device, model, [("batch", x), ("target", y)]):
            return

        dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        # ENVBUILD_SMOKE_LR exists for tests: a learning rate of 0 must fail the training gate
        learning_rate = float(os.environ.get("ENVBUILD_SMOKE_LR") or LEARNING_RATE)
        optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
        scaler = make_grad_scaler(torch, device.type) if precision == "fp16" else None
        report["grad_scaler"] = type(scaler).__module__ + "." + type(scaler).__name__ if scaler else None

        def autocast():
            if dtype is None:
                return contextlib.nullcontext()
            return torch.autocast(device_type=device.type, dtype=dtype)

        losses = []
        skipped = 0
        output_dtype = None
        output_device = None
        with common.TrainingClock(report, device.type == "cuda") as clock:
            for index in range(steps):
                optimizer.zero_grad(set_to_none=True)
                with autocast():
                    prediction = model(x)
                    loss = torch.nn.functional.mse_loss(prediction.float(), y)
                if output_dtype is None:
                    output_dtype, output_device = prediction.dtype, prediction.device
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scale_before = scaler.get_scale()
                    scaler.step(optimizer)
                    scaler.update()
                    if scaler.get_scale() < scale_before:  # inf/nan gradients: the scaler skipped this update
                        skipped += 1
                else:
                    loss.backward()
                    optimizer.step()
                losses.append(float(loss.item()))
                clock.step(index + 1, steps, losses[-1])
            with torch.no_grad(), autocast():
                final_loss = float(torch.nn.functional.mse_loss(model(x).float(), y).item())
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        clock.record(N_SAMPLES * steps)
        if scaler is not None:
            report["grad_scale_final"] = float(scaler.get_scale())
        report["updates_applied"] = steps - skipped

        hint = (
            "loss did not decrease: check that loss.backward() and optimizer.step() run every step "
            "and that optimizer.zero_grad() is not called between them"
        )
        common.judge_training(report, steps, losses, final_loss, skipped, hint)

        if output_device != device:
            common.misplaced(report, f"the forward ran on {output_device}, not {device}", CPU_PLACEMENT_HINT)
        expected = dtype if dtype is not None else torch.float32
        report["autocast_output_dtype"] = str(output_dtype).replace("torch.", "")
        common.check_precision(
            report,
            output_dtype,
            expected,
            precision,
            "autocast did not engage: wrap the forward in torch.autocast(device_type, dtype) with a dtype "
            "this device supports",
        )
        if device.type == "cuda":
            report["memory"] = memory_report(torch, device)
            common.check_memory(report, report["memory"])

    def check_multi_gpu(self, torch, report, gpus):
        value, seconds = run_allreduce(len(gpus))
        if isinstance(value, str):
            common.fail(report, "multi_gpu", value, common.NCCL_HINT)
            return
        common.record_allreduce(report, value, len(gpus), seconds, ALLREDUCE_TIMEOUT_S)


if __name__ == "__main__":
    sys.exit(TorchProgram().main())
