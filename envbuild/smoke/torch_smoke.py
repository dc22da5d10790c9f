"""PyTorch smoke training step, run inside a built image as `python /opt/envbuild/smoke.py`.

    python smoke.py [--device auto|gpu|cpu] [--steps N] [--precision fp32|fp16|bf16]

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

from envbuild.smoke._common import *

FRAMEWORK = "torch"

# --------------------------------------------------------------------------------------------------
# PyTorch part.

N_SAMPLES, CHANNELS, HEIGHT, WIDTH, N_OUT = 64, 3, 8, 8, 4
LEARNING_RATE = 3e-3
ALLREDUCE_TIMEOUT_S = 120


def collect_environment(torch, report):
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
        try:
            report["cudnn"] = cudnn_version_string(torch.backends.cudnn.version())
        except Exception as exc:
            report["notes"].append("cudnn version unknown: %s" % describe_exception(exc))
        try:
            nccl = torch.cuda.nccl.version()
            report["nccl"] = ".".join(str(part) for part in nccl) if isinstance(nccl, tuple) else str(nccl)
        except Exception as exc:
            report["notes"].append("nccl version unknown: %s" % describe_exception(exc))
    gpu_available = False
    try:
        gpu_available = bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception as exc:
        report["notes"].append("torch.cuda.is_available() raised %s" % describe_exception(exc))
    if gpu_available:
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            report["devices"].append({
                "name": props.name,
                "kind": "gpu",
                "compute_capability": "%d.%d" % (props.major, props.minor),
                "memory_total_bytes": int(props.total_memory),
            })
    else:
        report["devices"].append(cpu_device_entry())
        if nvidia_device_nodes():
            report["notes"].append("NVIDIA device nodes exist but torch sees no GPU (torch.version.cuda=%r)"
                                   % report["cuda_runtime"])
    return gpu_available


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
    wrong = ["parameter %s on %s" % (name, p.device)
             for name, p in model.named_parameters() if p.device != device]
    wrong += ["%s on %s" % (name, t.device) for name, t in tensors if t.device != device]
    first = next(model.parameters())
    report["placement"] = {"parameters": str(first.device), "batch": str(tensors[0][1].device)}
    if wrong:
        report["placement_ok"] = False
        if device.type != "cpu" and any(" on cpu" in item for item in wrong):
            hint = "model or batch is on the CPU: move both with .to(device)"
        else:
            hint = "model and batch must be on the same device: move both with .to(device)"
        fail(report, "placement", "expected everything on %s; %s" % (device, "; ".join(wrong[:5])), hint)
        return False
    report["placement_ok"] = True
    passed(report, "placement")
    return True


def make_grad_scaler(torch, device_type):
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler(device_type, init_scale=2.0 ** 10)
    return torch.cuda.amp.GradScaler(init_scale=2.0 ** 10)


def train(torch, report, device, steps, precision):
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
    monitor = GpuMonitor() if device.type == "cuda" else None
    t_train = time.perf_counter()
    if monitor is not None:
        monitor.__enter__()
    for _ in range(steps):
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
    with torch.no_grad(), autocast():
        final_loss = float(torch.nn.functional.mse_loss(model(x).float(), y).item())
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    train_seconds = time.perf_counter() - t_train
    if monitor is not None:
        monitor.__exit__(None, None, None)
        record_monitoring(report, monitor)
    report["timings_s"]["train"] = round(train_seconds, 3)
    record_throughput(report, N_SAMPLES * steps, train_seconds)
    if scaler is not None:
        report["grad_scale_final"] = float(scaler.get_scale())
    report["updates_applied"] = steps - skipped

    record_losses(report, losses, final_loss)
    hint = ("loss did not decrease: check that loss.backward() and optimizer.step() run every step "
            "and that optimizer.zero_grad() is not called between them")
    check_losses(report, losses, final_loss, OVERFLOW_HINT if skipped * 2 >= steps else hint)
    passed(report, "training")

    if output_device != device:
        report["placement_ok"] = False
        fail(report, "placement", "the forward ran on %s, not %s" % (output_device, device),
             "model or batch is on the CPU: move both with .to(device)")
    expected = dtype if dtype is not None else torch.float32
    report["autocast_output_dtype"] = str(output_dtype).replace("torch.", "")
    if output_dtype != expected:
        fail(report, "precision",
             "the forward produced %s, expected %s under %s" % (output_dtype, expected, precision),
             "autocast did not engage: wrap the forward in torch.autocast(device_type, dtype) with a dtype "
             "this device supports")
    else:
        passed(report, "precision")
    if device.type == "cuda":
        report["memory"] = memory_report(torch, device)
        check_memory(report, report["memory"])


def _allreduce_worker(rank, world, backend, port, queue, hang_rank):
    """One process per device, as torch.distributed wants: rank r contributes r + 1."""
    try:
        import datetime

        import torch
        import torch.distributed as dist

        if rank == hang_rank:  # tests: a rank that never joins, like a hung NCCL peer
            time.sleep(3600)
        dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=ALLREDUCE_TIMEOUT_S))
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
        queue.put("error on rank %d: %s" % (rank, describe_exception(exc)))


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
    workers = [context.Process(target=_allreduce_worker, daemon=True,
                               args=(rank, world, backend, port, results, hang_rank))
               for rank in range(world)]
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


def check_multi_gpu(torch, report):
    count = torch.cuda.device_count()
    if count < 2:
        skip(report, "multi_gpu", "one GPU visible")
        return
    value, seconds = run_allreduce(count)
    if isinstance(value, str):
        fail(report, "multi_gpu", value, NCCL_HINT)
        return
    record_allreduce(report, value, count, seconds, ALLREDUCE_TIMEOUT_S)


def run(argv):
    report, ok = start_report(argv, FRAMEWORK)
    if not ok:
        return emit(report)
    device_requested, steps, precision = report["device_requested"], report["steps"], report["precision"]

    torch = import_framework(
        report, ("torch",),
        "torch is installed but does not load: reinstall it; check its CUDA libraries match the image")
    if torch is None:
        return emit(report)

    try:
        gpu_available = collect_environment(torch, report)
    except Exception as exc:
        gpu_available = False
        report["notes"].append("collecting device information raised %s" % describe_exception(exc))

    if device_requested == "gpu" and not gpu_available:
        says = "torch.cuda.is_available() is False"
        if not report["cuda_runtime"] and not report.get("hip"):
            says += " and torch.version.cuda is None (a CPU-only build)"
        fail(report, "device", no_gpu_detail(says), NO_GPU_HINT)
        return emit(report)
    device = torch.device("cuda:0") if gpu_available and device_requested != "cpu" else torch.device("cpu")
    report["device_used"] = str(device) if device.type == "cuda" else "cpu"
    report["framework_device"] = str(device)
    passed(report, "device")

    effective = precision
    if precision == "fp16" and device.type == "cpu" and os.environ.get("ENVBUILD_SMOKE_CPU_FP16") != "1":
        effective = "bf16"
        report["notes"].append("fp16 autocast is a GPU feature: ran bf16 on the CPU instead")
    report["precision_effective"] = effective

    if device.type == "cuda":
        check_driver(report)
        capability = torch.cuda.get_device_capability(device.index or 0)
        check_arch(report, capability, report.get("arch_list"))
    else:
        skip_gpu_gates(report, "cpu")
    try:
        train(torch, report, device, steps, effective)
        if device.type == "cuda":
            check_multi_gpu(torch, report)
    except Exception as exc:
        training_failure(report, exc, (
            (("no kernel image", "not compatible"),
             "this GPU's arch is not in torch.cuda.get_arch_list(): install a torch build that has it",
             False),
            (("out of memory",),
             "CUDA out of memory: free the GPU (nvidia-smi) or set PYTORCH_CUDA_ALLOC_CONF", True),
            (("CUDA", "cuDNN", "CUDNN"),
             "CUDA/cuDNN error: check the driver supports the image's CUDA runtime (nvidia-smi)", False),
        ))
    return emit(report)


def main(argv=None):
    return guarded_main(run, FRAMEWORK, argv)


if __name__ == "__main__":
    sys.exit(main())
