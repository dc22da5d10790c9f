"""JAX smoke training step, run inside a built image as `python /opt/envbuild/smoke.py`.

    python smoke.py [--device auto|gpu|cpu] [--steps N] [--precision fp32|fp16|bf16]
                    [--import MODULE ...] [--command CMD]

After the training step it runs the user's checks (the checks gate, smoke_common.run_checks): each
--import and the --command, or what smoke_checks.json beside it says (an image's [smoke] imports and
command).

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

import math
import os
import sys

# smoke_common.py lies beside this file. Python puts a script's directory first on sys.path, but not
# under `python -I` or PYTHONSAFEPATH=1: put it there for those too.
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import smoke_common as common

FRAMEWORK = "jax"

# --------------------------------------------------------------------------------------------------
# JAX part.

N_SAMPLES, CHANNELS, HEIGHT, WIDTH, HIDDEN_CHANNELS, HIDDEN, N_OUT = 64, 3, 8, 8, 8, 32, 4
LEARNING_RATE = 3e-3
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
FP16_INITIAL_LOSS_SCALE = 2.0**10
GPU_PLATFORMS = ("cuda", "rocm", "gpu")
ALLREDUCE_TIMEOUT_S = 120
OOM_HINT = "GPU out of memory: free the GPU (nvidia-smi) or lower XLA_PYTHON_CLIENT_MEM_FRACTION"


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
                wrong.append("{} on {}".format(label, ", ".join(sorted(str(d) for d in where))))
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
        h = lax.conv_general_dilated(
            x.astype(compute_dtype),
            p["conv_w"],
            window_strides=(1, 1),
            padding="SAME",
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
        )
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
        correction1 = 1.0 - beta1**new_count
        correction2 = 1.0 - beta2**new_count
        new_params = tree_map(
            lambda p, m, v: p - learning_rate * (m / correction1) / (jnp.sqrt(v / correction2) + ADAM_EPS),
            params,
            new_m,
            new_v,
        )
        if loss_scaling:  # skip the update and halve the scale when the scaled gradients overflowed

            def keep(new, old):
                return tree_map(lambda a, b: jnp.where(finite, a, b), new, old)

            new_params, new_m, new_v = keep(new_params, params), keep(new_m, adam_m), keep(new_v, adam_v)
            new_count = jnp.where(finite, new_count, count)
            scale = jnp.where(finite, scale, scale / 2.0)
        return new_params, new_m, new_v, new_count, scale, loss

    return forward, jax.jit(loss_fn), jax.jit(step)


def compute_capability_of(device):
    """(major, minor) from a JAX GPU device's compute_capability ("9.0"), or None when it has none."""
    text = getattr(device, "compute_capability", None)
    if text is None:
        return None
    parts = str(text).strip().split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


class JaxProgram(common.Program):
    framework = FRAMEWORK
    modules = ("jax", "jax.numpy")
    broken_hint = (
        "jax is installed but does not load: install matching jax, jaxlib and jax-cuda plugin versions"
    )
    environ = (("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),)
    training_hints = (
        (("RESOURCE_EXHAUSTED",), OOM_HINT, False),
        (("out of memory",), OOM_HINT, True),
        (
            ("DNN", "cuDNN", "CUDA"),
            "CUDA/cuDNN error: check the driver supports the image's CUDA and jax-cuda plugin matches",
            False,
        ),
    )
    gpu_error = "not checked"  # why jax.devices() found no GPU, once collect_environment returned

    def collect_environment(self, jax, report):
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
            report["notes"].append(f"jax.default_backend() raised {common.describe_exception(exc)}")
        gpus, error = gpu_devices(jax)
        if gpus:
            try:
                from jax._src.lib import cuda_versions  # private, but the only place JAX reports these

                if cuda_versions is not None:
                    report["cuda_runtime"] = common.cuda_version_string(
                        cuda_versions.cuda_runtime_get_version()
                    )
                    report["cudnn"] = common.cudnn_version_string(cuda_versions.cudnn_get_version())
            except Exception as exc:
                report["notes"].append(f"CUDA/cuDNN versions unknown: {common.describe_exception(exc)}")
            common.record_version(report, "nccl", "nccl version", common.nccl_version_string)
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
            common.record_cpu_only(report, f"JAX sees no GPU ({error})")
        self.gpu_error = error
        return gpus

    def no_gpu_says(self, report):
        return f"jax.devices('gpu') found none ({self.gpu_error})"

    def select_device(self, jax, report, gpus, on_gpu):
        try:
            device = gpus[0] if on_gpu else jax.devices("cpu")[0]
        except Exception as exc:
            common.fail(
                report,
                "device",
                f"no CPU device: {common.describe_exception(exc)}",
                "JAX_PLATFORMS hides the CPU backend: unset it or include cpu",
            )
            return None
        report["device_used"] = "cpu" if device.platform == "cpu" else str(device)
        report["framework_device"] = f"{device} ({device.platform})"
        return device

    def compute_capability(self, jax, report, device, gpus):
        """From the device; JAX does not report its compiled archs, so the arch gate checks no list."""
        capability = compute_capability_of(device)
        if capability is None:
            reported = getattr(device, "compute_capability", None)
            report["notes"].append(f"compute capability unknown ({reported!r})")
        return capability

    def train(self, jax, report, device, steps, precision):
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
            hint = f"parameters or batch are not on {device}: place both with jax.device_put(x, device)"
            if not common.check_placed(report, wrong, device, hint):
                return

            output = jax.eval_shape(forward, params, x)
            report["forward_output_dtype"] = str(output.dtype)

            losses = []
            with common.TrainingClock(report, device.platform != "cpu") as clock:
                for index in range(steps):
                    params, adam_m, adam_v, count, scale, loss = step(
                        params, adam_m, adam_v, count, scale, x, y
                    )
                    losses.append(float(loss))
                    clock.step(index + 1, steps, losses[-1])
                    if index == 0:
                        report["timings_s"]["first_step_with_compile"] = round(clock.elapsed(), 3)
                final_loss = float(loss_fn(params, x, y))
            clock.record(N_SAMPLES * steps)
            if loss_scaling:
                report["loss_scale_final"] = float(scale)
            report["updates_applied"] = int(count)

            hint = (
                "loss did not decrease: check the optimizer update applies jax.grad's gradients to the "
                "parameters that the next step uses (jax arrays are immutable: keep the returned params)"
            )
            common.judge_training(report, steps, losses, final_loss, steps - report["updates_applied"], hint)

            after = check_placement(jax, report, device, [("params after training", params), ("loss", loss)])
            if after:
                common.misplaced(
                    report,
                    "after training: {}".format("; ".join(after[:5])),
                    "the jitted step ran elsewhere: commit its inputs with jax.device_put(x, device)",
                )

        common.check_precision(
            report,
            output.dtype,
            jnp.dtype(compute_dtype),
            precision,
            "cast parameters and batch with .astype(jnp.bfloat16 / jnp.float16) inside the forward",
        )

    def check_multi_gpu(self, jax, report, gpus):
        """An all-reduce (psum under pmap) across every GPU: device r contributes r + 1."""
        count = len(gpus)

        def allreduce():
            import numpy as np

            values = np.arange(1, count + 1, dtype=np.float32)
            summed = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i", devices=gpus)(values)
            return float(np.asarray(summed)[0])

        common.timed_collective(report, allreduce, count, ALLREDUCE_TIMEOUT_S)


if __name__ == "__main__":
    sys.exit(JaxProgram().main())
