"""Every environment variable envbuild reads, in one list: its name, what reads it, and what it does.

Data only: nothing in the tool reads its variables through this list (each is read where it matters,
often before any of this could be imported). It is the documentation's source (docs:
reference/environment.md), and tests/unit/test_envvars.py holds it to the code both ways: every
`ENVBUILD_*` name in envbuild/ and templates/ is listed here, and every name listed here is read
somewhere. The tests' own variables, which envbuild never reads, are listed apart (TEST_VARIABLES).
"""

from __future__ import annotations

from envbuild._util.record import Record


class EnvVar(Record):
    """`name`: the variable. `read_by`: the commands or programs that read it. `effect`: what it does,
    its values and default."""

    __slots__ = ("name", "read_by", "effect")
    name: str
    read_by: str
    effect: str


VARIABLES = (
    EnvVar(
        name="ENVBUILD_MATRIX",
        read_by="every command with `--matrix`",
        effect="the matrix directory when `--matrix` is not given (before the spec's `[site] matrix`)",
    ),
    EnvVar(
        name="ENVBUILD_CACHE_DIR",
        read_by="every command that loads the matrix; `audit`, `build` and `verify` of a local image",
        effect="where the parsed-matrix cache and the audit's facts per layer list live (default "
        "`$XDG_CACHE_HOME/envbuild`); empty disables both",
    ),
    EnvVar(
        name="ENVBUILD_AUDIT_READ",
        read_by="`audit`, `build` and `verify --gpu` of a local image",
        effect="`save`: read the layers the audit has not seen through `docker save`, even when the "
        "Engine's own overlay2 storage is readable here (the default reads it)",
    ),
    EnvVar(
        name="ENVBUILD_LOCK_KEY",
        read_by="`lock`, `render`, `build`, `lock --check`",
        effect="the HMAC key for keyed locks, when `--lock-key-file` is not given",
    ),
    EnvVar(
        name="ENVBUILD_PUSH",
        read_by="`build`",
        effect="`1` (or `true`, `yes`, `on`): push, as `--push` does; `0`, `false`, `no`, `off` or empty: "
        "not (the flag wins)",
    ),
    EnvVar(
        name="ENVBUILD_BASE_IMAGE",
        read_by="`build`",
        effect="the base image reference, as `--base-image` (a mirror for every build step of a CI job)",
    ),
    EnvVar(
        name="ENVBUILD_WHEELHOUSE",
        read_by="`build`",
        effect="an existing directory of wheels to install from, as `--wheelhouse`",
    ),
    EnvVar(
        name="ENVBUILD_BUNDLE",
        read_by="`build`",
        effect="an existing bundle directory (`envbuild vendor`'s) to build from air-gapped, as `--bundle`",
    ),
    EnvVar(
        name="ENVBUILD_SMOKE_DEVICE",
        read_by="`build`; and the smoke programs (`smoke.py` in images)",
        effect="`cpu` or `gpu`: the device of the smoke step, as `--smoke-device`, before the spec's "
        "`[smoke] device`; a smoke program run by hand takes it as its default `--device`",
    ),
    EnvVar(
        name="ENVBUILD_ENGINE",
        read_by="`build`, `verify`, `promote`, `doctor`",
        effect="`docker` (default) or `podman`: the container engine, as `--engine` (the flag wins; for "
        "`build`, before `[build] engine`)",
    ),
    EnvVar(
        name="ENVBUILD_PODMAN",
        read_by="`--engine podman`",
        effect="the podman binary to run (default: `podman` on `PATH`)",
    ),
    EnvVar(
        name="ENVBUILD_GPU_ACCESS",
        read_by="`build`, `verify` (Docker)",
        effect="`auto` (default), `legacy` or `cdi`: how a GPU smoke step reaches the GPUs, as "
        "`--gpu-access` (the flag wins)",
    ),
    EnvVar(
        name="ENVBUILD_CDI_SPEC_DIRS",
        read_by="`doctor`, `build`, `verify`",
        effect="colon-separated CDI spec directories to read instead of `/etc/cdi` and `/var/run/cdi`",
    ),
    EnvVar(
        name="ENVBUILD_BUILDER",
        read_by="`build`",
        effect="`auto`, `api` or `buildkit`, as `--builder`",
    ),
    EnvVar(
        name="ENVBUILD_NO_CACHE",
        read_by="`build`",
        effect="`1`: build without the layer cache, as `--no-cache`",
    ),
    EnvVar(
        name="ENVBUILD_JOBS",
        read_by="`build`",
        effect="how many targets build at once, as `-j` (1 or more)",
    ),
    EnvVar(
        name="ENVBUILD_OUTPUT",
        read_by="`build`",
        effect="the output directory, as `-o` (default `build/`)",
    ),
    EnvVar(
        name="ENVBUILD_SIGN_KEY_PASSWORD",
        read_by="`build --sign-key`, `promote --sign-key`",
        effect="the passphrase of an encrypted signing key",
    ),
    EnvVar(
        name="ENVBUILD_TODAY",
        read_by="`lock --check`, `doctor`, `init`",
        effect="`YYYY-MM-DD`: the day end-of-life warnings (and `init`'s default driver branch) are judged "
        "on, for reproducible CI logs",
    ),
    EnvVar(
        name="ENVBUILD_INSECURE_REGISTRIES",
        read_by="every registry call (`lock`, `promote --to`, `audit REPO@sha256:...`)",
        effect="comma-separated `host[:port]`s spoken to over plain `http` (loopback always is); every "
        "other registry is `https`",
    ),
    EnvVar(
        name="ENVBUILD_MAX_DOWNLOAD_BYTES",
        read_by="`lock` (conda repodata), `matrix refresh` (wheels)",
        effect="the most bytes one download may be (default 2 GiB)",
    ),
    EnvVar(
        name="ENVBUILD_MAX_LAYER_BYTES",
        read_by="`audit REPO@sha256:...`, the registry inventory of `attest` and `build --push`",
        effect="the largest size a manifest may declare for one layer read from a registry (default 64 "
        "GiB); a layer is read no further than its declared size",
    ),
    EnvVar(
        name="ENVBUILD_HTTP_DEADLINE_S",
        read_by="every HTTP request",
        effect="seconds one request may take from its start to its last byte (default 600)",
    ),
    EnvVar(
        name="ENVBUILD_MAX_UNPACK_BYTES",
        read_by="`audit`, `build`, `verify --gpu`, the SBOM inventory",
        effect="the most bytes one image layer or wheel may unpack to (default 64 GiB)",
    ),
    EnvVar(
        name="ENVBUILD_MAX_UNPACK_RATIO",
        read_by="`audit`, `build`, `verify --gpu`, the SBOM inventory",
        effect="the most unpacked bytes per packed byte of a layer or wheel, past its first 64 MiB "
        "(default 200)",
    ),
    EnvVar(
        name="ENVBUILD_MAX_MEMBER_BYTES",
        read_by="`audit`, `build`, `verify --gpu`, the SBOM inventory",
        effect="the most bytes of one file inside a layer or wheel that the audit reads (default 8 GiB)",
    ),
    EnvVar(
        name="ENVBUILD_DEBUG",
        read_by="every command",
        effect="set (to anything): an internal error shows its Python traceback instead of the one-line "
        '"this is a bug" message',
    ),
    EnvVar(
        name="ENVBUILD_PYPI_URL",
        read_by="`matrix refresh`",
        effect="PyPI base URL (`--pypi-url`)",
    ),
    EnvVar(
        name="ENVBUILD_PYTORCH_INDEX_URL",
        read_by="`matrix refresh`",
        effect="base of the per-CUDA PyTorch indexes (`--pytorch-index-url`)",
    ),
    EnvVar(
        name="ENVBUILD_CUDA_REPOSITORY",
        read_by="`matrix refresh`",
        effect="the `nvidia/cuda` repository to list (`--cuda-repository`)",
    ),
    EnvVar(
        name="ENVBUILD_RUNTIME_DIR",
        read_by="`verify --runtime apptainer|enroot|charliecloud`",
        effect="where the image is unpacked for the smoke step, deleted afterwards (default `$TMPDIR`; a "
        "node-local disk on a cluster)",
    ),
    EnvVar(
        name="ENVBUILD_BINFMT_DIR",
        read_by="`verify`, `build`",
        effect="where `binfmt_misc` is read to tell whether QEMU runs a foreign-architecture image "
        "(default `/proc/sys/fs/binfmt_misc`)",
    ),
    EnvVar(
        name="ENVBUILD_PREFLIGHT",
        read_by="every Python start in an image envbuild built (the preflight guard)",
        effect="`strict` (default): stop with exit status 78 on a node the image cannot run on; `warn`: "
        "print the verdict and run; `off`: no check",
    ),
    EnvVar(
        name="ENVBUILD_PREFLIGHT_ROOT",
        read_by="the preflight guard",
        effect="read the driver's files (`proc/driver/nvidia/version`, "
        "`proc/driver/nvidia/gpus/*/information`) under this directory instead of `/`; for tests",
    ),
    EnvVar(
        name="ENVBUILD_PREFLIGHT_VERDICT",
        read_by="the preflight guard (it sets it)",
        effect="the verdict, stamped with the node and image, that child processes inherit so they do not "
        "judge again",
    ),
    EnvVar(
        name="ENVBUILD_SMOKE_STEPS",
        read_by="the smoke programs",
        effect="default `--steps`",
    ),
    EnvVar(
        name="ENVBUILD_SMOKE_PRECISION",
        read_by="the smoke programs",
        effect="default `--precision`",
    ),
    EnvVar(
        name="ENVBUILD_SMOKE_LR",
        read_by="the smoke programs",
        effect="the learning rate; for tests (0 must fail the training gate)",
    ),
    EnvVar(
        name="ENVBUILD_SMOKE_CPU_FP16",
        read_by="the smoke programs",
        effect="`1` keeps fp16 on the CPU instead of falling back to bf16; for tests",
    ),
    EnvVar(
        name="ENVBUILD_SIGN_KEY",
        read_by="the attach step of a `ci github --sign-key-secret NAME` workflow (not envbuild)",
        effect="the PEM private key, from the secret NAME; the step writes it to a 0600 temporary file and "
        "never prints it",
    ),
    EnvVar(
        name="ENVBUILD_SIGN_KEY_FILE",
        read_by="the attach step of a `ci github --sign-key-secret NAME` workflow",
        effect='that file\'s path, passed as `envbuild attest ... --sign-key "$ENVBUILD_SIGN_KEY_FILE"` and '
        "removed when the step ends",
    ),
)

# The tests' own variables (tests/, bench/, .ci/run): envbuild never reads them.
TEST_VARIABLES = (
    EnvVar(
        name="ENVBUILD_TEST_REGISTRY",
        read_by="the tests and benchmarks that push or pull",
        effect="a registry on loopback, set by `.ci/run`",
    ),
    EnvVar(
        name="ENVBUILD_TEST_WHEELHOUSE",
        read_by="the Docker tests and benchmarks",
        effect="the torch wheelhouse the test images install from",
    ),
    EnvVar(
        name="ENVBUILD_TEST_WHEELHOUSE_ARM64",
        read_by="the arm64 lock and QEMU tests",
        effect="the aarch64 JAX wheelhouse",
    ),
    EnvVar(
        name="ENVBUILD_TEST_WHEELHOUSE_JAX_AMD64",
        read_by="the two-platform image test",
        effect="the same JAX for x86_64, the other half of the two-platform image",
    ),
    EnvVar(
        name="ENVBUILD_TEST_CUDA_WHEELHOUSE",
        read_by="the real CUDA image's tests",
        effect="torch 2.6.0 cu124 and its nvidia-* wheels",
    ),
    EnvVar(
        name="ENVBUILD_TEST_CUDA_WHEELHOUSE_LOCK",
        read_by="the real CUDA image's tests",
        effect="the lock `.ci/run`'s background download of that wheelhouse holds while it runs",
    ),
    EnvVar(
        name="ENVBUILD_TEST_CUDA_WHEELS_ALL",
        read_by="the nvidia-* table's replay",
        effect="`1`: read all 13 of those wheels in full",
    ),
    EnvVar(
        name="ENVBUILD_TEST_PYTHON38",
        read_by="the smoke programs' byte-compile check",
        effect="a Python 3.8 to compile them with",
    ),
    EnvVar(
        name="ENVBUILD_TEST_PRETEND",
        read_by="the smoke tests' stand-in environment",
        effect="a value it reports",
    ),
    EnvVar(
        name="ENVBUILD_TEST_ARM64_BASE_LOCK",
        read_by="the tests that need the arm64 base image",
        effect="the lock `.ci/run`'s background build of that base holds while it runs; they wait on it",
    ),
    EnvVar(
        name="ENVBUILD_TEST_ARM64_BASE_LOG",
        read_by="the tests that need the arm64 base image",
        effect="the log of that background build",
    ),
    EnvVar(
        name="ENVBUILD_TEST_TIMES",
        read_by="the test run (tests/helpers/timings.py)",
        effect="a file that gets one JSON line per test phase, for `bench/ci_time.py`",
    ),
    EnvVar(
        name="ENVBUILD_REQUIRE_DOCKER",
        read_by="the Docker tests",
        effect="`1`: a missing Docker Engine fails them instead of skipping them",
    ),
)
