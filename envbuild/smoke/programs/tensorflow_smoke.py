"""TensorFlow smoke training step, run inside a built image as `python /opt/envbuild/smoke.py`.

    python smoke.py [--device auto|gpu|cpu] [--steps N] [--precision fp32|fp16|bf16]
                    [--import MODULE ...] [--command CMD]

After the training step it runs the user's checks (the checks gate, smoke_common.run_checks): each
--import and the --command, or what smoke_checks.json beside it says (an image's [smoke] imports and
command).

ENVBUILD_SMOKE_DEVICE, ENVBUILD_SMOKE_STEPS and ENVBUILD_SMOKE_PRECISION give the defaults when a flag is
absent (built-in defaults: auto, 20, fp32). The program trains a tiny seeded Keras model (Conv2D, then an
MLP) to fit a fixed random linear map for N steps of a tf.function with GradientTape and an Adam update,
and checks the gates import, device, placement, training and precision; on a GPU also driver (the host
driver against NVIDIA_REQUIRE_CUDA), arch (the GPU against tf.sysconfig.get_build_info()'s compiled
capabilities) and multi_gpu (a MirroredStrategy all-reduce across every GPU, with a timeout); memory is
skipped (a torch feature). On the CPU those four are "skipped: cpu". ENVBUILD_SMOKE_LR overrides the
learning rate (tests set 0 to see the training gate fail). bf16/fp16 use the Keras
mixed_precision policy ('mixed_bfloat16' / 'mixed_float16'); fp16 wraps the optimizer in a
LossScaleOptimizer (Keras 3 and Keras 2 APIs both handled). It prints exactly one JSON report as the last
line of stdout and exits 0 only when every gate passed, else 1.

Only the standard library, tensorflow and numpy (a tensorflow dependency) are used: envbuild itself is not
installed in the image. Python 3.8+. TF_CPP_MIN_LOG_LEVEL defaults to 2 here to keep the output quiet, and
GPU memory growth is turned on so the smoke step does not reserve the whole GPU.
ENVBUILD_SMOKE_CPU_FP16=1 keeps fp16 on the CPU instead of falling back to bf16 (for testing the
LossScaleOptimizer path on a machine without a GPU).
"""

from __future__ import annotations

import math
import os
import sys

# smoke_common.py lies beside this file. Python puts a script's directory first on sys.path, but not
# under `python -I` or PYTHONSAFEPATH=1: put it there for those too.
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import smoke_common as common

FRAMEWORK = "tensorflow"

# --------------------------------------------------------------------------------------------------
# TensorFlow part.

N_SAMPLES, CHANNELS, HEIGHT, WIDTH, HIDDEN_CHANNELS, HIDDEN, N_OUT = 64, 3, 8, 8, 8, 32, 4
LEARNING_RATE = 3e-3
FP16_INITIAL_LOSS_SCALE = 2.0**10
POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
ALLREDUCE_TIMEOUT_S = 120


def arch_names(capabilities):
    """The build's compute capabilities as "sm_XY"/"compute_XY": keeps those forms, turns "8.0" into sm_80."""
    names = []
    for item in capabilities:
        text = str(item).strip().lower()
        if text.startswith(("sm_", "compute_")):
            names.append(text)
            continue
        digits = text.replace(".", "")
        names.append("sm_" + digits if digits.isdigit() and "." in text else text)
    return names


def device_of(tf, value):
    """Return (type, index) parsed from a tensor's or variable's .device string, e.g. ('GPU', 0)."""
    text = getattr(value, "device", None)
    if not text and hasattr(value, "value"):  # a Keras 3 variable wraps the tf.Variable
        text = getattr(value.value, "device", None)
    if not text:
        return None, None, str(text)
    spec = tf.DeviceSpec.from_string(text)
    return (spec.device_type or "").upper(), spec.device_index, text


def check_placement(tf, report, device_type, named_values):
    wrong = []
    for name, value in named_values:
        kind, index, text = device_of(tf, value)
        if kind != device_type or (index or 0) != 0:
            wrong.append("{} on {}".format(name, text or "an unknown device"))
    return wrong


def make_loss_scale_optimizer(keras, inner):
    lso = keras.mixed_precision.LossScaleOptimizer
    try:
        return lso(inner, initial_scale=FP16_INITIAL_LOSS_SCALE)
    except TypeError:
        return lso(inner)


def loss_scale_of(optimizer):
    for attribute in ("dynamic_scale", "loss_scale"):  # Keras 3, Keras 2
        value = getattr(optimizer, attribute, None)
        if value is not None:
            try:
                return float(value.numpy() if hasattr(value, "numpy") else value)
            except Exception:
                return None
    return None


class TensorflowProgram(common.Program):
    framework = FRAMEWORK
    modules = ("tensorflow",)
    broken_hint = "tensorflow is installed but does not load: reinstall it with its pinned numpy/protobuf"
    environ = (("TF_CPP_MIN_LOG_LEVEL", "2"),)
    training_hints = (
        (("RESOURCE_EXHAUSTED", "OOM"), "GPU out of memory: free the GPU (nvidia-smi)", False),
        (
            ("DNN", "cuDNN", "CUDA"),
            "CUDA/cuDNN error: check the driver supports the image's CUDA and cuDNN (tf build info)",
            False,
        ),
    )

    def collect_environment(self, tf, report):
        report["framework_version"] = str(tf.__version__)
        try:
            report["keras_version"] = str(tf.keras.__version__)
        except Exception:
            report["keras_version"] = None
        build = {}
        try:
            build = dict(tf.sysconfig.get_build_info())
        except Exception as exc:
            report["notes"].append(f"tf.sysconfig.get_build_info() raised {common.describe_exception(exc)}")
        report["is_cuda_build"] = bool(build.get("is_cuda_build", False))
        report["cuda_runtime"] = str(build["cuda_version"]) if build.get("cuda_version") else None
        report["cudnn"] = str(build["cudnn_version"]) if build.get("cudnn_version") else None
        capabilities = build.get("cuda_compute_capabilities")
        if capabilities:
            report["arch_list"] = arch_names(capabilities)
        else:
            report["arch_list"] = None if report["is_cuda_build"] else []
        gpus = []
        try:
            gpus = list(tf.config.list_physical_devices("GPU"))
        except Exception as exc:
            report["notes"].append(
                f"tf.config.list_physical_devices('GPU') raised {common.describe_exception(exc)}"
            )
        if gpus:
            common.record_version(report, "nccl", "nccl version", common.nccl_version_string)
            for gpu in gpus:
                try:
                    tf.config.experimental.set_memory_growth(gpu, True)
                except Exception as exc:  # already initialised: harmless for a smoke step
                    report["notes"].append(f"memory growth not set on {gpu.name}: {exc}")
                entry = {"name": gpu.name, "kind": "gpu"}
                try:
                    details = tf.config.experimental.get_device_details(gpu)
                    entry["name"] = str(details.get("device_name", gpu.name))
                    capability = details.get("compute_capability")
                    if capability:
                        major, minor = capability
                        entry["compute_capability"] = f"{major}.{minor}"
                except Exception:
                    pass
                report["devices"].append(entry)
        else:
            common.record_cpu_only(
                report, f"TensorFlow sees no GPU (is_cuda_build={report['is_cuda_build']})"
            )
        return gpus

    def no_gpu_says(self, report):
        says = "tf.config.list_physical_devices('GPU') is empty"
        if not report.get("is_cuda_build"):
            says += " and tf.sysconfig.get_build_info() says is_cuda_build=False (a CPU-only build)"
        return says

    def select_device(self, tf, report, gpus, on_gpu):
        report["device_used"] = "cuda:0" if on_gpu else "cpu"
        report["framework_device"] = "/GPU:0" if on_gpu else "/CPU:0"
        return on_gpu  # train() builds under tf.device("/GPU:0") when True, "/CPU:0" when False

    def compute_capability(self, tf, report, device, gpus):
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        if not capability:
            return None
        major, minor = (int(part) for part in tuple(capability)[:2])
        return major, minor

    def train(self, tf, report, gpu, steps, precision):
        import numpy as np

        keras = tf.keras
        device_type = "GPU" if gpu else "CPU"
        device_name = f"/{device_type}:0"
        in_device = f"`with tf.device('{device_name}'):`"
        keras.mixed_precision.set_global_policy(POLICIES[precision])
        report["mixed_precision_policy"] = POLICIES[precision]
        keras.utils.set_random_seed(0)

        rng = np.random.RandomState(1)
        features = CHANNELS * HEIGHT * WIDTH
        x_host = rng.standard_normal((N_SAMPLES, HEIGHT, WIDTH, CHANNELS)).astype(np.float32)
        target_map = (rng.standard_normal((features, N_OUT)) / math.sqrt(features)).astype(np.float32)
        y_host = x_host.reshape(N_SAMPLES, -1) @ target_map

        with tf.device(device_name):
            x = tf.constant(x_host)
            y = tf.constant(y_host)
            model = keras.Sequential(
                [
                    keras.Input(shape=(HEIGHT, WIDTH, CHANNELS)),
                    keras.layers.Conv2D(HIDDEN_CHANNELS, 3, padding="same", activation="relu"),
                    keras.layers.Flatten(),
                    keras.layers.Dense(HIDDEN, activation="relu"),
                    keras.layers.Dense(N_OUT),
                ]
            )
            # ENVBUILD_SMOKE_LR exists for tests: a learning rate of 0 must fail the training gate
            learning_rate = float(os.environ.get("ENVBUILD_SMOKE_LR") or LEARNING_RATE)
            optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
            if precision == "fp16":
                optimizer = make_loss_scale_optimizer(keras, optimizer)
            report["optimizer"] = type(optimizer).__module__ + "." + type(optimizer).__name__
            variables = model.trainable_variables
            keras2_scaling = hasattr(optimizer, "get_scaled_loss")
            keras3_scaling = not keras2_scaling and hasattr(optimizer, "scale_loss")

            first = device_of(tf, variables[0])[2]
            report["placement"] = {"parameters": first, "batch": x.device}
            named = [(f"variable {v.name}", v) for v in variables] + [("batch", x), ("target", y)]
            wrong = check_placement(tf, report, device_type, named)
            hint = f"model or batch is not on {device_name}: build both inside {in_device}"
            if not common.check_placed(report, wrong, device_name, hint):
                return

            output = model(x, training=False)
            report["forward_output_dtype"] = output.dtype.name

            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    prediction = model(x, training=True)
                    loss = tf.reduce_mean(tf.square(tf.cast(prediction, tf.float32) - y))
                    if keras2_scaling:
                        scaled = optimizer.get_scaled_loss(loss)
                    elif keras3_scaling:
                        scaled = optimizer.scale_loss(loss)
                    else:
                        scaled = loss
                grads = tape.gradient(scaled, variables)
                if keras2_scaling:
                    grads = optimizer.get_unscaled_gradients(grads)
                # Keras 3's LossScaleOptimizer unscales here. zip(strict=) needs Python 3.10.
                optimizer.apply_gradients(zip(grads, variables))
                return loss, prediction

            @tf.function
            def evaluate(x, y):
                return tf.reduce_mean(tf.square(tf.cast(model(x, training=False), tf.float32) - y))

            losses = []
            with common.TrainingClock(report, gpu) as clock:
                for index in range(steps):
                    loss, prediction = train_step(x, y)
                    losses.append(float(loss.numpy()))
                    clock.step(index + 1, steps, losses[-1])
                    if index == 0:
                        report["timings_s"]["first_step_with_trace"] = round(clock.elapsed(), 3)
                        step_device = device_of(tf, prediction)
                final_loss = float(evaluate(x, y).numpy())
            clock.record(N_SAMPLES * steps)
        if precision == "fp16":
            report["loss_scale_final"] = loss_scale_of(optimizer)
        try:  # counts applied updates only: a LossScaleOptimizer does not count the steps it skipped
            report["updates_applied"] = int(optimizer.iterations.numpy())
        except Exception:
            report["updates_applied"] = None

        hint = (
            "loss did not decrease: check tape.gradient covers model.trainable_variables and "
            "optimizer.apply_gradients runs every step"
        )
        skipped = steps - report["updates_applied"] if report["updates_applied"] is not None else 0
        common.judge_training(report, steps, losses, final_loss, skipped, hint)

        if step_device[0] is not None and step_device[0] != device_type:
            common.misplaced(
                report,
                f"the training step ran on {step_device[2]}, not {device_name}",
                f"the step left {device_name}: run it inside {in_device}",
            )
        common.check_precision(
            report,
            report["forward_output_dtype"],
            {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[precision],
            f"policy {POLICIES[precision]}",
            f"call keras.mixed_precision.set_global_policy('{POLICIES[precision]}') before building the "
            "model",
        )
        if gpu:
            try:
                info = tf.config.experimental.get_memory_info("GPU:0")
                report["memory"] = {"peak_bytes": int(info["peak"]), "current_bytes": int(info["current"])}
            except Exception as exc:
                report["notes"].append(f"GPU memory info unknown: {common.describe_exception(exc)}")

    def check_multi_gpu(self, tf, report, gpus):
        """An all-reduce across every GPU with MirroredStrategy: replica r contributes r + 1."""

        def allreduce():
            strategy = tf.distribute.MirroredStrategy()

            def contribution():
                replica = tf.distribute.get_replica_context().replica_id_in_sync_group
                return tf.cast(replica, tf.float32) + 1.0

            per_replica = strategy.run(contribution)
            summed = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
            return float(summed.numpy())

        common.timed_collective(report, allreduce, len(gpus), ALLREDUCE_TIMEOUT_S)


if __name__ == "__main__":
    sys.exit(TensorflowProgram().main())
