"""Code shared by the three smoke programs, shipped beside them.

In an image this file is /opt/envbuild/smoke_common.py, next to the program /opt/envbuild/smoke.py,
which imports it by name: Python puts a script's directory first on sys.path. `envbuild smoke` writes
both files into one temporary directory the same way. envbuild itself is not installed in an image,
so this file keeps to the standard library and Python 3.8, and never imports envbuild.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # the program's start, for the report's duration_s

import argparse  # noqa: E402
import contextlib  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402

GATES = (
    "arguments",
    "import",
    "device",
    "driver",
    "arch",
    "placement",
    "training",
    "precision",
    "memory",
    "multi_gpu",
    "checks",
)
GPU_GATES = ("driver", "arch", "memory", "multi_gpu")
DEVICES = ("auto", "gpu", "cpu")
DEVICE_ALIASES = {"cuda": "gpu"}
PRECISIONS = ("fp32", "fp16", "bf16")
# The smoke defaults, here once for the programs and (through envbuild.smoke) for envbuild itself.
DEFAULT_STEPS = 20
DEFAULT_PRECISION = "fp32"
DEFAULT_TIMEOUT_S = 600  # how long envbuild waits for a smoke run (the program itself has no timeout)
PRECISION_ALIASES = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
MAX_STEPS = 100_000
LOSSES_KEPT = 100
USAGE_HINT = (
    "usage: smoke.py [--device auto|gpu|cpu] [--steps N>=1] [--precision fp32|fp16|bf16] "
    "[--import MODULE ...] [--command CMD], or ENVBUILD_SMOKE_DEVICE / ENVBUILD_SMOKE_STEPS / "
    "ENVBUILD_SMOKE_PRECISION"
)
OVERFLOW_HINT = (
    "fp16 gradients overflowed and the loss scaler skipped the updates: "
    "start from a lower loss scale, or use bf16"
)
NO_GPU_HINT = "no GPU visible: check nvidia-smi, run with --gpus all, and that the framework build has CUDA"
BUG_HINT = "a bug in the smoke program: report it to envbuild"
# The user's own checks ([smoke] imports and command), run after the training step in the same run. The
# limits are the spec's too (envbuild.spec.validate uses the rules below): a list or a line longer than
# these is a mistake, not a check.
CHECKS_GATE = "checks"  # the one gate that may be skipped on a GPU and a CPU alike: none configured
CHECKS_FILE = "smoke_checks.json"  # beside this file in an image that has checks: {"imports", "command"}
MAX_IMPORTS = 64
MAX_MODULE_CHARS = 200
MAX_COMMAND_CHARS = 1000
CHECK_OUTPUT_LINES = 20  # what a failed check's report entry keeps of its output: the last lines,
CHECK_OUTPUT_CHARS = 2000  # and of those at most the last this many characters


def effective_precision(precision, *, on_gpu, bf16=True, fp16=True, cpu_fp16=False):
    """The precision a smoke run trains in: the one rule, for this program and for envbuild.

    On the CPU, fp16 (a GPU format: autocast and loss scaling are GPU features) becomes bf16 unless
    `cpu_fp16` (ENVBUILD_SMOKE_CPU_FP16=1, for testing). On a GPU, a format the GPU lacks (`bf16` /
    `fp16`: whether it has it, from its compute capability) becomes the nearest it has: bf16 -> fp16
    (the other 16-bit format, also trained with autocast) where it has fp16, else fp32; fp16 -> fp32.
    envbuild's resolve and render warn with it and each CI verify job passes its GPU's answer as
    --precision (envbuild.resolve.precision), so the job trains in what its runner's GPU computes in.
    """
    if not on_gpu:
        return "bf16" if precision == "fp16" and not cpu_fp16 else precision
    if precision == "bf16" and not bf16:
        return "fp16" if fp16 else "fp32"
    if precision == "fp16" and not fp16:
        return "fp32"
    return precision


class _ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and exit 2: the report must come out instead
        raise _ArgumentError(message)


def _env_default(name, fallback):
    value = os.environ.get(name, "").strip()
    return value if value else fallback


def parse_args(argv, framework):
    """Return (device, steps, precision, checks) or raise _ArgumentError with a one-line reason.

    checks: {"imports": [...], "command": text or None, "argv": its words or None}, from --import and
    --command, each of which replaces what CHECKS_FILE beside this file says (an image's [smoke] checks).
    """
    parser = _Parser(prog="smoke.py", description=f"envbuild smoke training step ({framework}).")
    parser.add_argument(
        "--device",
        default=_env_default("ENVBUILD_SMOKE_DEVICE", "auto"),
        help="auto (GPU when the framework sees one), gpu or cpu",
    )
    parser.add_argument(
        "--steps",
        default=_env_default("ENVBUILD_SMOKE_STEPS", str(DEFAULT_STEPS)),
        help=f"training steps (default {DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--precision",
        default=_env_default("ENVBUILD_SMOKE_PRECISION", DEFAULT_PRECISION),
        help="fp32, fp16 or bf16",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="a module to import after the training step (repeatable; default: the image's [smoke] imports)",
    )
    parser.add_argument(
        "--command",
        help="a command to run after the training step, without a shell (default: the image's [smoke] "
        "command)",
    )
    args = parser.parse_args(argv)
    device = str(args.device).strip().lower()
    device = DEVICE_ALIASES.get(device, device)
    if device not in DEVICES:
        raise _ArgumentError("--device {!r} is not one of {}".format(args.device, "|".join(DEVICES)))
    precision = str(args.precision).strip().lower()
    precision = PRECISION_ALIASES.get(precision, precision)
    if precision not in PRECISIONS:
        raise _ArgumentError("--precision {!r} is not one of {}".format(args.precision, "|".join(PRECISIONS)))
    try:
        steps = int(str(args.steps).strip())
    except ValueError:
        raise _ArgumentError(f"--steps {args.steps!r} is not an integer") from None
    if not 1 <= steps <= MAX_STEPS:
        raise _ArgumentError(f"--steps {steps} is outside 1..{MAX_STEPS}")
    imports, command = read_checks_file(
        os.path.join(os.path.dirname(os.path.realpath(__file__)), CHECKS_FILE)
    )
    if args.imports is not None:
        imports = args.imports
    if args.command is not None:
        command = args.command
    return device, steps, precision, checked_checks(imports, command)


# --- the user's checks: their rules (the spec's too), and running them


def module_problem(name):
    """Why `name` is not a module `import` takes (dotted ASCII identifiers, no keyword), or None."""
    import keyword
    import re

    if not isinstance(name, str) or not name:
        return "is not a module name"
    if len(name) > MAX_MODULE_CHARS:
        return f"is longer than {MAX_MODULE_CHARS} characters"
    parts = name.split(".")
    if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part) for part in parts):
        return "is not a Python module name (dotted identifiers: ASCII letters, digits and _)"
    keywords = [part for part in parts if keyword.iskeyword(part)]
    if keywords:
        return f"is not a Python module name ({keywords[0]!r} is a keyword)"
    return None


# What a POSIX shell would act on, by where it stands: the command runs without a shell, so each of these
# must be inside single quotes (where a shell takes them literally too), or the command would mean one
# thing here and another typed at a prompt.
_SHELL_OUTSIDE_QUOTES = set(";&|<>()$`\\*?[]{}")
_SHELL_IN_DOUBLE_QUOTES = set("$`\\")


def _shell_character(command):
    """(the first thing a shell would interpret, `&&` or `$` say, and the quoting it stands in), or None."""
    quote = None
    word_start = True
    for index, char in enumerate(command):
        if quote == "'":
            if char == "'":
                quote = None
            continue
        if quote == '"':
            if char == '"':
                quote = None
            elif char in _SHELL_IN_DOUBLE_QUOTES:
                return char, "inside double quotes"
            continue
        if char in "'\"":
            quote = char
        elif char in _SHELL_OUTSIDE_QUOTES or (word_start and char in "~#"):
            operator = char
            for following in command[index + 1 :]:
                if char not in "&|<>;" or following not in "&|<>;":
                    break
                operator += following
            return operator, "outside quotes"
        word_start = char == " "
    return None


def command_problem(command):
    """(its words, None) when `command` is one a smoke step runs, else (None, why not)."""
    import shlex

    if not isinstance(command, str) or not command.strip():
        return None, "is empty"
    if len(command) > MAX_COMMAND_CHARS:
        return None, f"is longer than {MAX_COMMAND_CHARS} characters"
    if not command.isprintable():  # a newline, a tab, a NUL, any other control or separator but " "
        return None, "contains a character that is not printable (a newline, a tab, a NUL); write one line"
    found = _shell_character(command)
    if found is not None:
        char, where = found
        return None, f"has {char!r} {where}: a shell would act on it, and the command runs without one"
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return None, f"cannot be split into words ({exc})"
    if not words:
        return None, "is empty"
    return words, None


def checked_checks(imports, command):
    """The checks of `imports` and `command`, or an _ArgumentError naming the first bad one."""
    if not isinstance(imports, (list, tuple)):
        raise _ArgumentError("the imports must be a list of module names")
    if len(imports) > MAX_IMPORTS:
        raise _ArgumentError(f"{len(imports)} imports: at most {MAX_IMPORTS}")
    for name in imports:
        problem = module_problem(name)
        if problem:
            raise _ArgumentError(f"import {name!r} {problem}")
    if len(set(imports)) != len(imports):
        twice = sorted({name for name in imports if imports.count(name) > 1})
        raise _ArgumentError(f"import {twice[0]!r} is named twice")
    words = None
    if command is not None:
        words, problem = command_problem(command)
        if problem:
            raise _ArgumentError(f"command {command!r} {problem}")
    return {"imports": list(imports), "command": command, "argv": words}


def read_checks_file(path):
    """(imports, command) that CHECKS_FILE at `path` asks for; ([], None) when there is none."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return [], None
    except (OSError, ValueError) as exc:
        raise _ArgumentError(f"{path} cannot be read: {describe_exception(exc)}") from None
    if not isinstance(document, dict) or set(document) - {"imports", "command"}:
        raise _ArgumentError(f'{path} is not a checks file: expected {{"imports": [...], "command": ...}}')
    return document.get("imports", []), document.get("command")


def preflight_verdict():
    """The image's preflight guard on this node, for the report: {verdict, mode, summary}, or None where
    there is no guard (an image built before it, or `envbuild smoke` on a host). The guard already ran
    when this Python started (its .pth); it is asked again here, because a verdict it inherited from a
    parent process is only a word, and the report keeps what it found."""
    try:
        import envbuild_preflight
    except ImportError:
        return None
    mode = os.environ.get("ENVBUILD_PREFLIGHT", "").strip().lower() or "strict"
    mode = mode if mode in ("strict", "warn", "off") else "strict"
    try:
        document = envbuild_preflight.evaluate()
        return {"verdict": document["verdict"], "mode": mode, "summary": envbuild_preflight.summary(document)}
    except Exception as exc:  # the guard's own bug is a note, never a failed smoke step
        return {"verdict": "error", "mode": mode, "summary": describe_exception(exc)}


def new_report(framework, device, steps, precision):
    return {
        "preflight": preflight_verdict(),
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
        "gates": {gate: "not run" for gate in GATES},
        "driver": None,
        "monitoring": None,
        "throughput_samples_per_s": None,
        "checks": [],
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


def skip(report, gate, why):
    """A gate that does not apply here: reported as skipped with the reason, never as passed."""
    if report["gates"].get(gate) in ("not run", None):
        report["gates"][gate] = "skipped: " + why


def skip_gpu_gates(report, why):
    for gate in GPU_GATES:
        skip(report, gate, why)


# --- driver: what the host runs, and the image's NVIDIA_REQUIRE_CUDA against it


def _version_tuple(text):
    parts = []
    for piece in str(text).strip().split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def cuda_version_string(value):
    """cudaRuntimeGetVersion() / cuDriverGetVersion(): 12080 means 12.8."""
    value = int(value)
    return f"{value // 1000}.{(value % 1000) // 10}"


def _version_code_string(value, wide_from):
    """NVIDIA's M*1000+m*100+p codes, which widen to M*10000+m*100+p from `wide_from` on."""
    if value >= wide_from:
        return f"{value // 10000}.{(value % 10000) // 100}.{value % 100}"
    return f"{value // 1000}.{(value % 1000) // 100}.{value % 100}"


def cudnn_version_string(value):
    """cudnnGetVersion(): 8907 means 8.9.7, 91400 means 9.14.0."""
    if value is None:
        return None
    return _version_code_string(int(value), 90000)


def nccl_version_string():
    """The NCCL that pip's nvidia-nccl package ships, if any (JAX and TensorFlow do not report one)."""
    import ctypes

    for entry in sys.path:
        library = os.path.join(entry, "nvidia", "nccl", "lib", "libnccl.so.2")
        if not os.path.isfile(library):
            continue
        version = ctypes.c_int()
        if ctypes.CDLL(library).ncclGetVersion(ctypes.byref(version)) != 0:
            return None
        return _version_code_string(version.value, 20900)
    return None


def driver_info():
    """The kernel driver version and the CUDA version its user-mode driver supports."""
    info = {"version": None, "cuda": None}
    try:
        with open("/proc/driver/nvidia/version") as handle:
            text = handle.read()
        words = text.split()
        for index, word in enumerate(words):
            if word == "Module" and index + 1 < len(words):
                candidate = words[index + 1]
                if candidate == "for" and index + 3 < len(words):
                    candidate = words[index + 3]
                if _version_tuple(candidate):
                    info["version"] = candidate
                    break
    except OSError:
        pass
    try:
        import ctypes

        libcuda = ctypes.CDLL("libcuda.so.1")
        value = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(value)) == 0 and value.value:
            info["cuda"] = cuda_version_string(value.value)
    except (OSError, AttributeError):
        pass
    return info


def require_satisfied(expression, driver_cuda, driver_version, brand=None):
    """Evaluate NVIDIA_REQUIRE_CUDA as the Container Toolkit does: spaces OR, commas AND.

    Returns (satisfied, the first unmet group). Keys: cuda, driver, brand, arch (unknown -> unmet).
    """
    known = {"cuda": driver_cuda, "driver": driver_version, "brand": brand}
    unmet = None
    for group in expression.split():
        ok = True
        for constraint in group.split(","):
            for op in (">=", "<=", "==", "!=", ">", "<", "="):
                if op in constraint:
                    key, value = constraint.split(op, 1)
                    break
            else:
                ok = False
                break
            have = known.get(key.strip())
            if have is None:
                ok = False
                break
            if key.strip() == "brand":
                same = have.lower() == value.lower()
                result = same if op in ("=", "==") else not same
            else:
                left, right = _version_tuple(have), _version_tuple(value)
                width = max(len(left), len(right))
                left, right = left + (0,) * (width - len(left)), right + (0,) * (width - len(right))
                result = {
                    ">=": left >= right,
                    "<=": left <= right,
                    ">": left > right,
                    "<": left < right,
                    "=": left == right,
                    "==": left == right,
                    "!=": left != right,
                }[op]
            if not result:
                ok = False
                break
        if ok:
            return True, None
        if unmet is None:
            unmet = group
    return False, unmet


def check_driver(report, environ=None):
    environ = os.environ if environ is None else environ
    info = driver_info() if report.get("driver") is None else report["driver"]
    report["driver"] = info
    requirement = environ.get("NVIDIA_REQUIRE_CUDA", "").strip()
    disabled = environ.get("NVIDIA_DISABLE_REQUIRE", "").strip().lower() in ("1", "t", "true", "yes")
    if not requirement or disabled:
        if info["cuda"] or info["version"]:
            passed(report, "driver")
        else:
            skip(report, "driver", "driver version unknown")
        return
    if not info["cuda"]:
        skip(report, "driver", "driver version unknown")
        return
    ok, unmet = require_satisfied(requirement, info["cuda"], info["version"])
    if ok:
        passed(report, "driver")
        return
    fail(
        report,
        "driver",
        "the driver supports CUDA {} (driver {}) but the image requires {} (first unmet: {})".format(
            info["cuda"], info["version"] or "unknown", requirement, unmet
        ),
        "the host driver is too old for this image: upgrade the driver, or build for the CUDA it runs "
        "(envbuild resolve --driver <nvidia-smi's version>)",
    )


# --- arch: is the GPU in the build's compiled architectures ("no kernel image")


def arch_covers(capability, arch_list):
    """SASS for the same major and a minor <= the GPU's, or PTX for an arch <= the GPU's."""
    major, minor = capability
    for arch in arch_list:
        name = str(arch).lower()
        digits = "".join(ch for ch in name if ch.isdigit())
        if len(digits) < 2:
            continue
        arch_cc = (int(digits[:-1]), int(digits[-1]))
        if name.startswith("compute") and arch_cc <= (major, minor):
            return "ptx"
        if name.startswith("sm") and arch_cc[0] == major and arch_cc[1] <= minor:
            return "sass"
    return None


def check_arch(report, capability, arch_list):
    """capability: (major, minor); arch_list: ["sm_80", "compute_90", ...] or None when unknown."""
    major, minor = capability
    wanted = f"sm_{major}{minor}"
    report["compute_capability"] = f"{major}.{minor}"
    if not arch_list:
        skip(report, "arch", "the framework does not report its compiled architectures")
        return True
    how = arch_covers(capability, arch_list)
    if how is None:
        fail(
            report,
            "arch",
            "no kernel image is available for execution on the device: {} is not covered by the build's "
            "archs {}".format(wanted, ",".join(arch_list)),
            f"install a build compiled for compute capability {major}.{minor} "
            f"(envbuild resolve --gpu {major}.{minor})",
        )
        return False
    if how == "ptx":
        report["notes"].append(
            f"{wanted} runs through PTX JIT only: the first launch of each kernel compiles it"
        )
    passed(report, "arch")
    return True


# --- memory (torch): out-of-memory events and allocator retries are gated, fragmentation reported

OOM_HINT = (
    "CUDA out of memory: use a smaller batch, mixed precision (bf16), gradient accumulation or "
    "activation checkpointing; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against "
    "fragmentation"
)


def check_memory(report, memory):
    if memory is None:
        skip(report, "memory", "no allocator statistics")
        return
    ooms, retries = memory.get("num_ooms", 0), memory.get("num_alloc_retries", 0)
    if ooms or retries:
        fragmentation = 100.0 * memory.get("fragmentation", 0.0)
        fail(
            report,
            "memory",
            f"the allocator hit {ooms} out-of-memory event(s) and {retries} retry(ies); "
            f"fragmentation {fragmentation:.1f}%",
            OOM_HINT,
        )
        return
    passed(report, "memory")


# --- multi-GPU: a collective across every device, with a timeout so a hang becomes a failure

NCCL_HINT = (
    "the all-reduce hung or failed: try a single GPU first (CUDA_VISIBLE_DEVICES=0), rerun with "
    "NCCL_DEBUG=INFO, and check P2P/IB settings (NCCL_P2P_DISABLE=1, NCCL_IB_DISABLE=1) and the "
    "interconnect"
)


def record_allreduce(report, result, world, seconds, timeout):
    """result: the summed value, or None when it did not finish within timeout."""
    expected = world * (world + 1) / 2.0
    report["multi_gpu"] = {
        "devices": world,
        "expected": expected,
        "result": result,
        "seconds": round(seconds, 3),
        "timeout_s": timeout,
    }
    if result is None:
        fail(
            report,
            "multi_gpu",
            f"all-reduce across {world} devices did not finish within {timeout}s",
            NCCL_HINT,
        )
    elif abs(float(result) - expected) > 1e-3:
        fail(
            report,
            "multi_gpu",
            f"all-reduce across {world} devices gave {result}, expected {expected}",
            NCCL_HINT,
        )
    else:
        passed(report, "multi_gpu")


def timed_collective(report, function, count, timeout):
    """Run an in-process collective (JAX psum, TF MirroredStrategy) and record it as the multi_gpu gate.

    A hung collective's thread may block interpreter exit, so after reporting it the process exits hard.
    """
    started = time.perf_counter()
    try:
        value, finished = run_with_timeout(function, timeout)
    except Exception as exc:
        fail(report, "multi_gpu", describe_exception(exc), NCCL_HINT)
        return
    seconds = time.perf_counter() - started
    if not finished:
        record_allreduce(report, None, count, seconds, timeout)
        emit(report)
        os._exit(1)
    record_allreduce(report, float(value), count, seconds, timeout)


PROGRESS_PREFIX = "envbuild-smoke: "  # stderr lines the runner shows as they come (envbuild.image.verify)
PROGRESS_EVERY_S = 2.0  # a training step line at most this often (the first and last always)


def progress(text):
    """One progress line on stderr, flushed so `envbuild verify` shows it while the step runs (the
    report is stdout's); a closed stderr loses the line, never the step."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(PROGRESS_PREFIX + text + "\n")
        sys.stderr.flush()


def import_framework(report, modules, broken_hint):
    """Import the framework (the first of `modules` is returned), timing it and recording the import
    gate; None when it is missing or does not load."""
    import importlib

    started = time.perf_counter()
    progress(f"importing {', '.join(modules)}")
    try:
        loaded = [importlib.import_module(name) for name in modules]
    except ImportError as exc:
        fail(report, "import", describe_exception(exc), "the framework is not installed in this image")
        return None
    except Exception as exc:  # a broken install: versions apart, a missing shared library
        fail(report, "import", describe_exception(exc), broken_hint)
        return None
    report["timings_s"]["import"] = round(time.perf_counter() - started, 3)
    passed(report, "import")
    progress(f"imported in {report['timings_s']['import']:.1f} s")
    return loaded[0]


def training_failure(report, exc, hints):
    """Fail the training gate with the first hint whose needles appear in the error.

    hints: (needles, hint, fold) triples; fold=True matches the lower-cased text.
    """
    text = str(exc)
    hint = "training raised: read the detail"
    for needles, candidate, fold in hints:
        haystack = text.lower() if fold else text
        if any(needle in haystack for needle in needles):
            hint = candidate
            break
    fail(report, "training", describe_exception(exc), hint)


def start_report(argv, framework):
    """(the report for a run, True, its checks), or (report, False, None) when the arguments already
    failed it."""
    try:
        device_requested, steps, precision, checks = parse_args(argv, framework)
    except _ArgumentError as exc:
        report = new_report(framework, None, None, None)
        fail(report, "arguments", str(exc), USAGE_HINT)
        return report, False, None
    report = new_report(framework, device_requested, steps, precision)
    passed(report, "arguments")
    return report, True, checks


# --- the checks gate: the user's imports and command, each in a process of its own after the training
# step, in the same container, so a crash or an exit is reported as the check's, never loses the report

IMPORT_PROGRAM = (
    "import importlib, sys\n"
    "module = importlib.import_module(sys.argv[1])\n"
    "version = getattr(module, '__version__', None)\n"
    "print('\\n' + sys.argv[2] + (version if isinstance(version, str) else ''))\n"
)
VERSION_MARK = "envbuild-smoke-import-version: "
IMPORT_MISSING_HINT = (
    "{top} is not installed: add the package that provides it to [packages] pip and relock "
    "(a pip name can differ from its module's: scikit-learn is imported as sklearn, PyYAML as yaml)"
)
IMPORT_BROKEN_HINT = (
    "{name} is installed but importing it fails: read the check's output in the report; a version that "
    "conflicts with the framework's pins, or a system library missing from [packages] apt, is the usual cause"
)
COMMAND_HINT = (
    "your [smoke] command failed: the last lines of its output are in the report's checks; run it in the "
    "image to see all of it (docker run --rm IMAGE {command})"
)
COMMAND_MISSING_HINT = "install it in the image ([packages] pip or apt), or name it by its full path"


def output_tail(text):
    """The last CHECK_OUTPUT_LINES non-blank lines of a check's output, at most CHECK_OUTPUT_CHARS."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()][-CHECK_OUTPUT_LINES:]
    tail = "\n".join(lines)
    return tail if len(tail) <= CHECK_OUTPUT_CHARS else "..." + tail[-CHECK_OUTPUT_CHARS:]


def _exit_text(code):
    """exit 1, killed by SIGSEGV: how a check's process ended."""
    if code < 0:
        import signal

        try:
            return "killed by " + signal.Signals(-code).name
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def _run_check(argv, env):
    """(exit code, output: stdout and stderr together, seconds) of one check's process."""
    import subprocess

    started = time.perf_counter()
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, check=False
    )
    output = done.stdout.decode("utf-8", "replace")
    return done.returncode, output, round(time.perf_counter() - started, 3)


def check_import(report, name, env):
    """Import `name` with this Python in a fresh process: how a training script would import it."""
    code, output, seconds = _run_check([sys.executable, "-c", IMPORT_PROGRAM, name, VERSION_MARK], env)
    lines = output.splitlines()
    marks = [line for line in lines if line.startswith(VERSION_MARK)]
    entry = {"name": name, "kind": "import", "passed": code == 0 and bool(marks), "seconds": seconds}
    entry["version"] = (marks[-1][len(VERSION_MARK) :] or None) if marks else None
    entry["exit_code"] = code
    entry["output"] = None
    if not entry["passed"]:
        tail = output_tail("\n".join(line for line in lines if not line.startswith(VERSION_MARK)))
        entry["output"] = tail or None
        last = tail.splitlines()[-1] if tail else "no output"
        top = name.split(".")[0]
        missing = "ModuleNotFoundError" in last and (f"'{top}'" in last or f"'{name}'" in last)
        hint = (IMPORT_MISSING_HINT if missing else IMPORT_BROKEN_HINT).format(top=top, name=name)
        fail(report, CHECKS_GATE, f"import {name} failed ({_exit_text(code)}): {last}", hint)
    report["checks"].append(entry)


def check_command(report, command, argv, env):
    """Run the user's command, without a shell; `python` in its first word is this Python."""
    if argv[0] in ("python", "python3"):
        argv = [sys.executable, *argv[1:]]
    entry = {"name": command, "kind": "command", "passed": False, "seconds": 0.0, "exit_code": None}
    try:
        code, output, entry["seconds"] = _run_check(argv, env)
    except OSError as exc:  # not found, not executable
        entry["output"] = describe_exception(exc)
        fail(
            report,
            CHECKS_GATE,
            f"command `{command}` cannot run {argv[0]}: {exc.strerror or exc}",
            COMMAND_MISSING_HINT,
        )
        report["checks"].append(entry)
        return
    entry["exit_code"] = code
    entry["passed"] = code == 0
    entry["output"] = None
    if code != 0:
        tail = output_tail(output)
        entry["output"] = tail or None
        last = tail.splitlines()[-1] if tail else "no output"
        fail(
            report,
            CHECKS_GATE,
            f"command `{command}` failed ({_exit_text(code)}): {last}",
            COMMAND_HINT.format(command=command),
        )
    report["checks"].append(entry)


def run_checks(report, checks, on_gpu):
    """The checks gate: each import, then the command, on the device the training step used (a CPU
    step's checks see no GPU: CUDA_VISIBLE_DEVICES is empty for them), ENVBUILD_SMOKE_DEVICE naming it."""
    if not checks["imports"] and not checks["argv"]:
        skip(report, CHECKS_GATE, "none configured")
        return
    env = dict(os.environ, ENVBUILD_SMOKE_DEVICE="gpu" if on_gpu else "cpu")
    if not on_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    started = time.perf_counter()
    for name in checks["imports"]:
        progress(f"check: import {name}")
        check_import(report, name, env)
    if checks["argv"]:
        progress(f"check: {checks['command']}")
        check_command(report, checks["command"], checks["argv"], env)
    report["timings_s"]["checks"] = round(time.perf_counter() - started, 3)
    passed(report, CHECKS_GATE)


def guarded_main(run, framework, argv=None):
    """The report must come out even when the program itself has a bug."""
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except Exception as exc:
        report = new_report(framework, None, None, None)
        fail(report, "internal", describe_exception(exc), BUG_HINT)
        return emit(report)


def run_with_timeout(function, timeout):
    """(value, finished) of function() in a daemon thread: a hung collective cannot hang the report."""
    import threading

    box = {}

    def target():
        try:
            box["value"] = function()
        except Exception as exc:  # reported by the caller as a failed collective
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return None, False
    if "error" in box:
        raise box["error"]
    return box.get("value"), True


# --- monitoring: what nvidia-smi sees while the steps run


class GpuMonitor:
    """Samples utilization, memory, power and temperature with nvidia-smi during the training steps."""

    QUERY = "index,utilization.gpu,memory.used,power.draw,temperature.gpu"

    def __init__(self, interval=0.2):
        import shutil
        import threading

        self.interval = interval
        self.samples = []
        self.command = shutil.which("nvidia-smi")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        import subprocess

        out = subprocess.run(
            [self.command, "--query-gpu=" + self.QUERY, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout
        for line in out.splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) == 5:
                self.samples.append(fields)

    def _run(self):
        while not self._stop.is_set():
            try:
                self._sample()
            except Exception:
                return
            self._stop.wait(self.interval)

    def __enter__(self):
        if self.command:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.command:
            self._thread.join(5)
        return False

    def summary(self):
        if not self.command:
            return None
        names = ("utilization_pct", "memory_used_mib", "power_w", "temperature_c")
        per_gpu = {}
        for sample in self.samples:
            entry = per_gpu.setdefault(sample[0], {name: [] for name in names})
            for name, value in zip(names, sample[1:]):
                with contextlib.suppress(ValueError):
                    entry[name].append(float(value))
        result = {}
        for index, values in sorted(per_gpu.items()):
            result[index] = {
                name: {"max": max(v), "mean": round(sum(v) / len(v), 2)} if v else None
                for name, v in values.items()
            }
        return {"samples": len(self.samples), "gpus": result}


def record_monitoring(report, monitor):
    summary = monitor.summary()
    report["monitoring"] = summary
    if summary is None:
        report["notes"].append("nvidia-smi not found: no utilization/power/temperature samples")
        return
    for index, values in summary["gpus"].items():
        util = values.get("utilization_pct")
        if util and util["mean"] < 30 and summary["samples"] >= 5:
            report["notes"].append(
                "GPU {} averaged {}% utilization: a starved GPU - suspect the data pipeline (dataloader "
                "workers, pinned memory, batch size) before the model".format(index, util["mean"])
            )


def record_throughput(report, samples, seconds):
    if seconds > 0:
        report["throughput_samples_per_s"] = round(samples / seconds, 1)


def describe_exception(exc):
    return f"{type(exc).__name__}: {exc}"


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
    with contextlib.suppress(AttributeError, OSError, ValueError):
        entry["memory_total_bytes"] = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return entry


def nvidia_device_nodes():
    return sorted(glob.glob("/dev/nvidia[0-9]*"))


def record_cpu_only(report, framework_says):
    """The framework sees no GPU: the CPU is the report's device, with a note when the container has
    NVIDIA device nodes all the same."""
    report["devices"].append(cpu_device_entry())
    if nvidia_device_nodes():
        report["notes"].append("NVIDIA device nodes exist but " + framework_says)


def record_version(report, key, what, version_of):
    """report[key] = version_of(), or a note that `what` is unknown when asking raised."""
    try:
        report[key] = version_of()
    except Exception as exc:
        report["notes"].append(f"{what} unknown: {describe_exception(exc)}")


def no_gpu_detail(framework_says):
    nodes = nvidia_device_nodes()
    if nodes:
        where = "{} exist(s), so the container has a GPU but the framework cannot use it".format(
            ", ".join(nodes)
        )
    else:
        where = "no /dev/nvidia* device node in this container"
    return f"--device gpu but {framework_says}; {where}"


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
    return float(f"{value:.6g}")


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


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def loss_problem(losses, final_loss):
    """(finite, detail) saying why these losses do not show a working training step, or None.

    losses: the loss of each step before its update; final_loss: after the last update. Each must be a
    finite number, and the last below the first. envbuild applies the same rule to a report's losses
    before it promotes an image, so a report cannot claim a training step these numbers deny.
    """
    everything = [*list(losses), final_loss]
    bad = [i for i, v in enumerate(everything) if not _finite(v)]
    if bad:
        where = "after the last update" if bad[0] == len(losses) else f"at step {bad[0] + 1}"
        return False, f"loss is not finite {where} ({everything[bad[0]]!r})"
    if not losses:
        return True, "no training step recorded a loss"
    if not final_loss < losses[0]:
        return (
            True,
            f"loss did not decrease: first {losses[0]:.6g}, after {len(losses)} step(s) {final_loss:.6g}",
        )
    return None


def check_losses(report, losses, final_loss, not_decreasing_hint):
    problem = loss_problem(losses, final_loss)
    report["loss_decreased"] = problem is None
    if problem is None:
        return
    finite, detail = problem
    if not finite:
        hint = (
            "loss became NaN/Inf: lower the learning rate or use fp32/bf16 (fp16 needs loss scaling); "
            "if fp32 also fails, suspect the GPU build or driver"
        )
        fail(report, "training", detail, hint)
        return
    fail(report, "training", detail, not_decreasing_hint)


def judge_training(report, steps, losses, final_loss, skipped, not_decreasing_hint):
    """Record the losses and pass or fail the training gate.

    skipped: the updates a loss scaler skipped; when that is half the steps or more, an fp16 overflow is
    why the loss did not decrease, not the training step.
    """
    record_losses(report, losses, final_loss)
    check_losses(report, losses, final_loss, OVERFLOW_HINT if skipped * 2 >= steps else not_decreasing_hint)
    passed(report, "training")


class TrainingClock:
    """Times the training steps and samples the GPUs with nvidia-smi meanwhile (on a GPU):

    with TrainingClock(report, on_gpu) as clock:
        ...  # the steps; clock.elapsed() is the time since they started
    clock.record(samples)  # monitoring, timings_s.train and throughput_samples_per_s in the report
    """

    def __init__(self, report, on_gpu):
        self.report = report
        self.monitor = GpuMonitor() if on_gpu else None
        self.started = None
        self.seconds = None

    def __enter__(self):
        self.started = time.perf_counter()
        self.said = None
        if self.monitor is not None:
            self.monitor.__enter__()
        return self

    def elapsed(self):
        return time.perf_counter() - self.started

    def step(self, done, steps, loss):
        """A progress line after training step `done` of `steps`: the first, the last, and one every
        PROGRESS_EVERY_S between (a first step on a GPU compiles kernels for seconds)."""
        now = time.perf_counter()
        if done in (1, steps) or self.said is None or now - self.said >= PROGRESS_EVERY_S:
            self.said = now
            progress(f"step {done}/{steps}: loss {loss:.4g} ({now - self.started:.1f} s)")

    def __exit__(self, *exc_info):
        self.seconds = self.elapsed()
        if self.monitor is not None:
            self.monitor.__exit__(None, None, None)
        return False

    def record(self, samples):
        if self.monitor is not None:
            record_monitoring(self.report, self.monitor)
        self.report["timings_s"]["train"] = round(self.seconds, 3)
        record_throughput(self.report, samples, self.seconds)


def misplaced(report, detail, hint):
    report["placement_ok"] = False
    fail(report, "placement", detail, hint)


def check_placed(report, wrong, expected_on, hint):
    """The placement gate before training: wrong lists what is not on `expected_on` ("batch on cpu")."""
    if wrong:
        misplaced(report, "expected everything on {}; {}".format(expected_on, "; ".join(wrong[:5])), hint)
        return False
    report["placement_ok"] = True
    passed(report, "placement")
    return True


def check_precision(report, produced, expected, under, hint):
    """The precision gate: the forward's output dtype against what the precision (`under`) asks for."""
    if produced != expected:
        fail(report, "precision", f"the forward produced {produced}, expected {expected} under {under}", hint)
    else:
        passed(report, "precision")


def emit(report):
    report["duration_s"] = round(time.perf_counter() - _T0, 3)
    for gate, state in report["gates"].items():
        if state == "not run":
            report["gates"][gate] = "skipped: not reached"
    report["passed"] = not report["failed"]
    sys.stdout.flush()
    sys.stdout.write(json.dumps(_json_safe(report), sort_keys=False, allow_nan=False) + "\n")
    sys.stdout.flush()
    return 0 if report["passed"] else 1


# --- the run: the same steps and gates for the three frameworks


class Program:
    """One framework's smoke program. run() is the same for the three: a subclass names the framework
    and gives the steps that differ, the methods below that raise NotImplementedError. `fw` is the
    framework's module, `gpus` the GPUs collect_environment found, `device` what select_device chose.
    """

    framework = None  # the report's framework: "torch", "tensorflow" or "jax"
    modules = ()  # what the import gate imports, in order; the first is `fw`
    broken_hint = None  # the import gate's hint when the framework is installed but does not load
    environ = ()  # (name, value) defaults set before the import; a value already set wins
    fp16_cpu_note = "fp16 is a GPU precision: ran bf16 on the CPU instead"
    training_hints = ()  # training_failure's (needles, hint, fold) for an exception while training

    def collect_environment(self, fw, report):
        """Record versions and devices in the report; return the GPUs the framework sees (a list)."""
        raise NotImplementedError

    def no_gpu_says(self, report):
        """What the framework says about having no GPU, for the device gate's failure."""
        raise NotImplementedError

    def select_device(self, fw, report, gpus, on_gpu):
        """The device to train on (the first GPU when on_gpu), with device_used and framework_device
        recorded; None when that failed the device gate."""
        raise NotImplementedError

    def compute_capability(self, fw, report, device, gpus):
        """(major, minor) of the GPU, or None when unknown."""
        raise NotImplementedError

    def check_gpu(self, fw, report, device, gpus):
        """The driver and arch gates; memory is skipped (allocator statistics are a torch feature)."""
        try:
            check_driver(report)
        except Exception as exc:
            fail(report, "driver", f"checking the driver raised {describe_exception(exc)}", BUG_HINT)
        try:
            capability = self.compute_capability(fw, report, device, gpus)
            if capability is None:
                skip(report, "arch", "compute capability unknown")
            else:
                check_arch(report, capability, report.get("arch_list"))
        except Exception as exc:
            fail(
                report, "arch", f"checking the compute capability raised {describe_exception(exc)}", BUG_HINT
            )
        skip(report, "memory", "allocator statistics are a torch feature")

    def train(self, fw, report, device, steps, precision):
        """The training steps and the placement, training and precision gates."""
        raise NotImplementedError

    def check_multi_gpu(self, fw, report, gpus):
        """The multi_gpu gate: an all-reduce across the (two or more) GPUs."""
        raise NotImplementedError

    def run(self, argv):
        report, ok, checks = start_report(argv, self.framework)
        if not ok:
            return emit(report)
        device_requested, steps, precision = report["device_requested"], report["steps"], report["precision"]

        for name, value in self.environ:
            os.environ.setdefault(name, value)
        fw = import_framework(report, self.modules, self.broken_hint)
        if fw is None:
            return emit(report)

        gpus = []
        try:
            gpus = self.collect_environment(fw, report)
        except Exception as exc:
            report["notes"].append(f"collecting device information raised {describe_exception(exc)}")

        if device_requested == "gpu" and not gpus:
            fail(report, "device", no_gpu_detail(self.no_gpu_says(report)), NO_GPU_HINT)
            return emit(report)
        on_gpu = bool(gpus) and device_requested != "cpu"
        device = self.select_device(fw, report, gpus, on_gpu)
        if device is None:
            return emit(report)
        passed(report, "device")

        effective = effective_precision(
            precision, on_gpu=on_gpu, cpu_fp16=os.environ.get("ENVBUILD_SMOKE_CPU_FP16") == "1"
        )
        if effective != precision:
            report["notes"].append(self.fp16_cpu_note)
        report["precision_effective"] = effective

        if on_gpu:
            self.check_gpu(fw, report, device, gpus)
        else:
            skip_gpu_gates(report, "cpu")
        try:
            self.train(fw, report, device, steps, effective)
            if on_gpu and len(gpus) < 2:
                skip(report, "multi_gpu", "one GPU visible")
            elif on_gpu:
                self.check_multi_gpu(fw, report, gpus)
        except Exception as exc:
            training_failure(report, exc, self.training_hints)
        run_checks(report, checks, on_gpu)
        return emit(report)

    def main(self, argv=None):
        return guarded_main(self.run, self.framework, argv)
