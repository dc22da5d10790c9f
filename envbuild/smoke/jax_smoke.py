"""JAX smoke training step, run inside a built image as `python /opt/envbuild/smoke.py`.

    python smoke.py [--device auto|gpu|cpu] [--steps N] [--precision fp32|fp16|bf16]

ENVBUILD_SMOKE_DEVICE, ENVBUILD_SMOKE_STEPS and ENVBUILD_SMOKE_PRECISION give the defaults when a flag is
absent (built-in defaults: auto, 20, fp32). The program trains a tiny seeded model (a 2D convolution, then
an MLP) to fit a fixed random linear map for N jitted steps of forward, jax.grad and a hand-written Adam
update (optax is not assumed), and checks the gates import, device, placement, training and precision;
on a GPU also driver (the host driver against NVIDIA_REQUIRE_CUDA), arch (skipped: JAX does not report its
compiled architectures) and multi_gpu (a psum under jax.pmap across every GPU, with a timeout); memory is
skipped (a torch feature). On the CPU those four are "skipped: cpu". ENVBUILD_SMOKE_LR overrides the
learning rate (tests set 0 to see the training gate fail).
bf16/fp16 cast parameters and batch for the forward and keep fp32 master weights; fp16 also scales the
loss (halved on overflow, the step skipped). It prints exactly one JSON report as the last line of stdout
and exits 0 only when every gate passed, else 1.

Only the standard library, jax and numpy (a jax dependency) are used: envbuild itself is not installed in
the image. Python 3.8+. XLA_PYTHON_CLIENT_PREALLOCATE defaults to false here, so the smoke step does not
reserve most of the GPU; set it to override. ENVBUILD_SMOKE_CPU_FP16=1 keeps fp16 on the CPU instead of
falling back to bf16 (for testing the loss-scaling path on a machine without a GPU).
"""

from __future__ import annotations

from envbuild.smoke._common import *

FRAMEWORK = "jax"

# --------------------------------------------------------------------------------------------------
# JAX part.

N_SAMPLES, CHANNELS, HEIGHT, WIDTH, HIDDEN_CHANNELS, HIDDEN, N_OUT = 64, 3, 8, 8, 8, 32, 4
LEARNING_RATE = 3e-3
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
FP16_INITIAL_LOSS_SCALE = 2.0 ** 10
GPU_PLATFORMS = ("cuda", "rocm", "gpu")
ALLREDUCE_TIMEOUT_S = 120


def gpu_devices(jax):
    """Return (devices, error text) for the GPU backend."""
    errors = []
    for platform_name in GPU_PLATFORMS:
        try:
            found = jax.devices(platform_name)
        except Exception as exc:
            errors.append(str(exc))
            continue
        if found:
            return list(found), None
    return [], errors[-1] if errors else "no GPU devices"


def collect_environment(jax, report):
    report["framework_version"] = str(jax.__version__)
    try:
        import jaxlib

        report["jaxlib_version"] = str(getattr(jaxlib, "__version__", None) or jax.lib.__version__)
    except Exception:
        report["jaxlib_version"] = None
    report["default_backend"] = None
    try:
        report["default_backend"] = jax.default_backend()
    except Exception as exc:
        report["notes"].append("jax.default_backend() raised %s" % describe_exception(exc))
    gpus, error = gpu_devices(jax)
    if gpus:
        try:
            from jax._src.lib import cuda_versions  # private, but the only place JAX reports these

            if cuda_versions is not None:
                report["cuda_runtime"] = cuda_version_string(cuda_versions.cuda_runtime_get_version())
                report["cudnn"] = cudnn_version_string(cuda_versions.cudnn_get_version())
        except Exception as exc:
            report["notes"].append("CUDA/cuDNN versions unknown: %s" % describe_exception(exc))
        try:
            report["nccl"] = nccl_version_string()
        except Exception as exc:
            report["notes"].append("nccl version unknown: %s" % describe_exception(exc))
        for device in gpus:
            entry = {"name": str(getattr(device, "device_kind", device)), "kind": "gpu", "id": device.id}
            capability = getattr(device, "compute_capability", None)
            if capability is not None:
                entry["compute_capability"] = str(capability)
            try:
                stats = device.memory_stats() or {}
                if "bytes_limit" in stats:
                    entry["memory_limit_bytes"] = int(stats["bytes_limit"])
            except Exception:
                pass
            report["devices"].append(entry)
    else:
        report["devices"].append(cpu_device_entry())
        if nvidia_device_nodes():
            report["notes"].append("NVIDIA device nodes exist but JAX sees no GPU (%s)" % error)
    return gpus, error


def array_devices(array):
    devices = getattr(array, "devices", None)
    if callable(devices):
        return set(devices())
    return {array.device()}  # jax < 0.4.1


def check_placement(jax, report, device, named_trees):
    wrong = []
    for name, tree in named_trees:
        if hasattr(jax.tree_util, "tree_flatten_with_path"):
            paths = jax.tree_util.tree_flatten_with_path(tree)[0]
        else:  # older jax: no key paths
            paths = [((name,), leaf) for leaf in jax.tree_util.tree_leaves(tree)]
        for path, leaf in paths:
            where = array_devices(leaf)
            if where != {device}:
                label = name + "".join(str(part) for part in path) if path and path[0] != name else name
                wrong.append("%s on %s" % (label, ", ".join(sorted(str(d) for d in where))))
    return wrong


def init_params(np):
    rng = np.random.RandomState(0)

    def uniform(shape, fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return rng.uniform(-bound, bound, size=shape).astype(np.float32)

    conv_fan_in = CHANNELS * 3 * 3
    flat = HIDDEN_CHANNELS * HEIGHT * WIDTH
    return {
        "conv_w": uniform((HIDDEN_CHANNELS, CHANNELS, 3, 3), conv_fan_in),
        "conv_b": uniform((HIDDEN_CHANNELS,), conv_fan_in),
        "w1": uniform((flat, HIDDEN), flat),
        "b1": uniform((HIDDEN,), flat),
        "w2": uniform((HIDDEN, N_OUT), HIDDEN),
        "b2": uniform((N_OUT,), HIDDEN),
    }


def make_data(np):
    rng = np.random.RandomState(1)
    features = CHANNELS * HEIGHT * WIDTH
    x = rng.standard_normal((N_SAMPLES, CHANNELS, HEIGHT, WIDTH)).astype(np.float32)
    target_map = (rng.standard_normal((features, N_OUT)) / math.sqrt(features)).astype(np.float32)
    return x, x.reshape(N_SAMPLES, -1) @ target_map


def build_step(jax, jnp, compute_dtype, loss_scaling, learning_rate=LEARNING_RATE):
    lax = jax.lax
    tree_map = jax.tree_util.tree_map

    def forward(params, x):
        p = tree_map(lambda a: a.astype(compute_dtype), params)
        h = lax.conv_general_dilated(x.astype(compute_dtype), p["conv_w"], window_strides=(1, 1),
                                     padding="SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        h = jax.nn.relu(h + p["conv_b"][None, :, None, None])
        h = h.reshape(h.shape[0], -1)
        h = jax.nn.relu(h @ p["w1"] + p["b1"])
        return h @ p["w2"] + p["b2"]

    def loss_fn(params, x, y):
        return jnp.mean((forward(params, x).astype(jnp.float32) - y) ** 2)

    def scaled_loss(params, x, y, scale):
        loss = loss_fn(params, x, y)
        return loss * scale, loss

    def step(params, adam_m, adam_v, count, scale, x, y):
        grads, loss = jax.grad(scaled_loss, has_aux=True)(params, x, y, scale)
        grads = tree_map(lambda g: g.astype(jnp.float32) / scale, grads)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree_util.tree_leaves(grads)]))
        beta1, beta2 = ADAM_BETAS
        new_count = count + 1
        new_m = tree_map(lambda m, g: beta1 * m + (1.0 - beta1) * g, adam_m, grads)
        new_v = tree_map(lambda v, g: beta2 * v + (1.0 - beta2) * g * g, adam_v, grads)
        correction1 = 1.0 - beta1 ** new_count
        correction2 = 1.0 - beta2 ** new_count
        new_params = tree_map(
            lambda p, m, v: p - learning_rate * (m / correction1) / (jnp.sqrt(v / correction2) + ADAM_EPS),
            params, new_m, new_v)
        if loss_scaling:  # skip the update and halve the scale when the scaled gradients overflowed

            def keep(new, old):
                return tree_map(lambda a, b: jnp.where(finite, a, b), new, old)

            new_params, new_m, new_v = keep(new_params, params), keep(new_m, adam_m), keep(new_v, adam_v)
            new_count = jnp.where(finite, new_count, count)
            scale = jnp.where(finite, scale, scale / 2.0)
        return new_params, new_m, new_v, new_count, scale, loss

    return forward, jax.jit(loss_fn), jax.jit(step)


def train(jax, report, device, steps, precision):
    import numpy as np

    jnp = jax.numpy
    compute_dtype = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}[precision]
    loss_scaling = precision == "fp16"
    # ENVBUILD_SMOKE_LR exists for tests: a learning rate of 0 must fail the training gate
    learning_rate = float(os.environ.get("ENVBUILD_SMOKE_LR") or LEARNING_RATE)
    forward, loss_fn, step = build_step(jax, jnp, compute_dtype, loss_scaling, learning_rate)

    params_host = init_params(np)
    x_host, y_host = make_data(np)
    with jax.default_device(device):
        params = jax.device_put(params_host, device)
        x = jax.device_put(x_host, device)
        y = jax.device_put(y_host, device)
        adam_m = jax.tree_util.tree_map(jnp.zeros_like, params)
        adam_v = jax.tree_util.tree_map(jnp.zeros_like, params)
        adam_m, adam_v = jax.device_put(adam_m, device), jax.device_put(adam_v, device)
        count = jax.device_put(jnp.asarray(0, jnp.int32), device)
        initial_scale = FP16_INITIAL_LOSS_SCALE if loss_scaling else 1.0
        scale = jax.device_put(jnp.asarray(initial_scale, jnp.float32), device)

        wrong = check_placement(jax, report, device, [("params", params), ("batch", x), ("target", y)])
        report["placement"] = {
            "parameters": ", ".join(sorted(str(d) for d in array_devices(params["w1"]))),
            "batch": ", ".join(sorted(str(d) for d in array_devices(x))),
        }
        if wrong:
            report["placement_ok"] = False
            fail(report, "placement", "expected everything on %s; %s" % (device, "; ".join(wrong[:5])),
                 "parameters or batch are not on %s: place both with jax.device_put(x, device)" % device)
            return
        report["placement_ok"] = True
        passed(report, "placement")

        output = jax.eval_shape(forward, params, x)
        report["forward_output_dtype"] = str(output.dtype)

        losses = []
        monitor = GpuMonitor() if device.platform != "cpu" else None
        t_train = time.perf_counter()
        if monitor is not None:
            monitor.__enter__()
        try:
            for index in range(steps):
                params, adam_m, adam_v, count, scale, loss = step(params, adam_m, adam_v, count, scale, x, y)
                losses.append(float(loss))
                if index == 0:
                    report["timings_s"]["first_step_with_compile"] = round(time.perf_counter() - t_train, 3)
            final_loss = float(loss_fn(params, x, y))
        finally:
            train_seconds = time.perf_counter() - t_train
            if monitor is not None:
                monitor.__exit__(None, None, None)
        if monitor is not None:
            record_monitoring(report, monitor)
        report["timings_s"]["train"] = round(train_seconds, 3)
        record_throughput(report, N_SAMPLES * steps, train_seconds)
        if loss_scaling:
            report["loss_scale_final"] = float(scale)
        report["updates_applied"] = int(count)

        record_losses(report, losses, final_loss)
        hint = ("loss did not decrease: check the optimizer update applies jax.grad's gradients to the "
                "parameters that the next step uses (jax arrays are immutable: keep the returned params)")
        skipped = steps - report["updates_applied"]
        check_losses(report, losses, final_loss, OVERFLOW_HINT if skipped * 2 >= steps else hint)
        passed(report, "training")

        after = check_placement(jax, report, device, [("params after training", params), ("loss", loss)])
        if after:
            report["placement_ok"] = False
            fail(report, "placement", "after training: %s" % "; ".join(after[:5]),
                 "the jitted step ran elsewhere: commit its inputs with jax.device_put(x, device)")

    if output.dtype != jnp.dtype(compute_dtype):
        fail(report, "precision", "the forward produced %s, expected %s under %s" % (
            output.dtype, jnp.dtype(compute_dtype), precision),
             "cast parameters and batch with .astype(jnp.bfloat16 / jnp.float16) inside the forward")
    else:
        passed(report, "precision")


def compute_capability_of(device):
    """(major, minor) from a JAX GPU device's compute_capability ("9.0"), or None when it has none."""
    text = getattr(device, "compute_capability", None)
    if text is None:
        return None
    parts = str(text).strip().split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def check_gpu(report, device):
    """The driver, arch and memory gates on a GPU (JAX does not report its compiled archs)."""
    try:
        check_driver(report)
    except Exception as exc:
        fail(report, "driver", "checking the driver raised %s" % describe_exception(exc),
             "a bug in the smoke program: report it to envbuild")
    try:
        capability = compute_capability_of(device)
        if capability is None:
            reported = getattr(device, "compute_capability", None)
            report["notes"].append("compute capability unknown (%r)" % (reported,))
            skip(report, "arch", "compute capability unknown")
        else:
            check_arch(report, capability, None)
    except Exception as exc:
        fail(report, "arch", "checking the compute capability raised %s" % describe_exception(exc),
             "a bug in the smoke program: report it to envbuild")
    skip(report, "memory", "allocator statistics are a torch feature")


def check_multi_gpu(jax, report, gpus):
    """An all-reduce (psum under pmap) across every GPU: device r contributes r + 1."""
    count = len(gpus)
    if count < 2:
        skip(report, "multi_gpu", "one GPU visible")
        return

    def allreduce():
        import numpy as np

        values = np.arange(1, count + 1, dtype=np.float32)
        summed = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=gpus)(values)
        return float(np.asarray(summed)[0])

    timed_collective(report, allreduce, count, ALLREDUCE_TIMEOUT_S)


def run(argv):
    report, ok = start_report(argv, FRAMEWORK)
    if not ok:
        return emit(report)
    device_requested, steps, precision = report["device_requested"], report["steps"], report["precision"]

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = import_framework(
        report, ("jax", "jax.numpy"),
        "jax is installed but does not load: install matching jax, jaxlib and jax-cuda plugin versions")
    if jax is None:
        return emit(report)

    gpus, gpu_error = [], "not checked"
    try:
        gpus, gpu_error = collect_environment(jax, report)
    except Exception as exc:
        report["notes"].append("collecting device information raised %s" % describe_exception(exc))

    if device_requested == "gpu" and not gpus:
        fail(report, "device", no_gpu_detail("jax.devices('gpu') found none (%s)" % gpu_error), NO_GPU_HINT)
        return emit(report)
    try:
        device = gpus[0] if gpus and device_requested != "cpu" else jax.devices("cpu")[0]
    except Exception as exc:
        fail(report, "device", "no CPU device: %s" % describe_exception(exc),
             "JAX_PLATFORMS hides the CPU backend: unset it or include cpu")
        return emit(report)
    report["device_used"] = "cpu" if device.platform == "cpu" else str(device)
    report["framework_device"] = "%s (%s)" % (device, device.platform)
    passed(report, "device")

    effective = precision
    if precision == "fp16" and device.platform == "cpu" and os.environ.get("ENVBUILD_SMOKE_CPU_FP16") != "1":
        effective = "bf16"
        report["notes"].append("fp16 is a GPU precision: ran bf16 on the CPU instead")
    report["precision_effective"] = effective

    on_gpu = device.platform != "cpu"
    if on_gpu:
        check_gpu(report, device)
    else:
        skip_gpu_gates(report, "cpu")
    try:
        train(jax, report, device, steps, effective)
        if on_gpu:
            check_multi_gpu(jax, report, gpus)
    except Exception as exc:
        oom = "GPU out of memory: free the GPU (nvidia-smi) or lower XLA_PYTHON_CLIENT_MEM_FRACTION"
        training_failure(report, exc, (
            (("RESOURCE_EXHAUSTED",), oom, False),
            (("out of memory",), oom, True),
            (("DNN", "cuDNN", "CUDA"),
             "CUDA/cuDNN error: check the driver supports the image's CUDA and jax-cuda plugin matches",
             False),
        ))
    return emit(report)


def main(argv=None):
    return guarded_main(run, FRAMEWORK, argv)


if __name__ == "__main__":
    sys.exit(main())
