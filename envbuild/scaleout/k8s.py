"""`envbuild ci k8s`: one Kubernetes Job per build (target and platform) and GPU type that runs the
smoke step of a candidate, by digest, in a GPU node pool.

Kubernetes has no `docker run` to wrap: the cluster pulls the image and runs the smoke program as the
Job's container, and `kubectl logs job/NAME` is its stdout. `envbuild verify REF --from-log FILE`
(runtime.fromlog) judges that output as every other runtime's is judged, and `envbuild promote REF
--to TAG --report FILE` promotes from the report (docs/ci.md: Verify on Kubernetes).

What the Job asks of the cluster, and why:
- `resources.limits["nvidia.com/gpu"]: 1` (NVIDIA's device plugin) for a GPU smoke step, none for a
  CPU one; a node selector per `--gpu-type` on `nvidia.com/gpu.product`, the label NVIDIA's GPU
  Feature Discovery puts on each GPU node (e.g. NVIDIA-H100-80GB-HBM3:
  https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gpu-feature-discovery/README.md), and
  `kubernetes.io/arch` for the build's platform; `--runtime-class` for clusters whose GPU nodes need
  the `nvidia` RuntimeClass.
- for a GPU smoke step, required node affinity on GFD's driver and compute-capability labels
  (`gpu_node_terms`): the scheduler keeps the Job off a node whose driver is older than the stack's
  floor or whose GPU the build has no kernels for, the nodes where the image's preflight guard would
  stop it anyway (exit 78), so such a node is "unschedulable", not a failed verification.
- the image's preflight guard first (`container_command`): its one-line verdict opens the pod's log,
  then the smoke program's report is the log's last line, as `verify --from-log` reads it.
- the least a smoke step needs: no service account token, the image's own non-root user (the uid
  render's Dockerfiles set), no privilege escalation, no capabilities, a read-only root filesystem with
  an emptyDir on /tmp (HOME and TMPDIR point there: the smoke program writes nothing else), the
  runtime's default seccomp profile;
- no retries (`backoffLimit: 0`, `restartPolicy: Never`): a flaky GPU is a failed verification, not
  one to retry until it passes; `activeDeadlineSeconds` the spec's smoke timeout plus the time a
  multi-GB pull may take; the finished Job is kept a day (`ttlSecondsAfterFinished`) for its logs.

The image is a candidate by digest: `--image BUILD=REPO@sha256:<64 hex>` per build (what `envbuild
build --push` printed). A build without one gets `REPO@sha256:DIGEST`, which no registry serves: the
kubelet refuses it as an invalid image name, so a Job nobody filled in never runs the wrong image.

Every value from the command line lands in a YAML scalar (scaleout.quoting.yaml_scalar) after a check
of what Kubernetes accepts there (RFC 1123 names, label keys and values): an invalid one is a
UsageError naming its flag. The Jobs are validated in the tests with kubernetes-validate against
K8S_VERSION.
"""

from __future__ import annotations

import hashlib
import os
import re

from envbuild._util.record import Record
from envbuild.errors import UsageError
from envbuild.matrix.arch import ArchList
from envbuild.matrix.model import Matrix, find_gpu
from envbuild.oci import labels
from envbuild.oci.reference import DIGEST_RE
from envbuild.plan.builds import builds
from envbuild.plan.plan import build_plan
from envbuild.plan.strategy import strategy_for
from envbuild.preflight import GUARD_COMMAND, STOP_STATUS, smoke_environment
from envbuild.resolve.precision import gpus_precision, target_precision
from envbuild.scaleout.generated import emit
from envbuild.scaleout.quoting import shell_word, yaml_scalar
from envbuild.smoke import smoke_command
from envbuild.spec.model import Spec, Target

# the Kubernetes version the Jobs are validated against (kubernetes-validate, in the tests; docs/ci.md)
K8S_VERSION = "1.33.0"
GPU_RESOURCE = "nvidia.com/gpu"  # NVIDIA's device plugin
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # GPU Feature Discovery
ARCH_LABEL = "kubernetes.io/arch"
# GPU Feature Discovery's labels for the node's driver and GPU (its README above): integers as text
DRIVER_MAJOR_LABEL = "nvidia.com/cuda.driver.major"
COMPUTE_MAJOR_LABEL = "nvidia.com/gpu.compute.major"
COMPUTE_MINOR_LABEL = "nvidia.com/gpu.compute.minor"
SHELL = "/bin/sh"  # every image envbuild renders has one (its base is a distribution's)
PULL_ALLOWANCE_S = 1800  # a few GB over a cluster's network, on top of the smoke step's own timeout
TTL_S = 86400  # a day to run `kubectl logs` before the Job is deleted
DEFAULT_OUTPUT = "k8s"
COMMAND = "ci k8s"
PLACEHOLDER = "DIGEST"
APP_LABEL = "app.kubernetes.io/name"
APP = "envbuild-verify"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


class K8sJob(Record):
    """One Job file: its name (also the file's, <name>.yaml), the build it verifies, the GPU type it
    asks for ("" for any), and the Job document."""

    __slots__ = ("name", "build", "gpu_type", "document")
    name: str
    build: str
    gpu_type: str
    document: dict


def jobs(
    matrix: Matrix,
    spec: Spec,
    *,
    gpu_types: list[str] | None = None,
    node_selectors: list[str] | None = None,
    runtime_class: str | None = None,
    namespace: str | None = None,
    pull_secret: str | None = None,
    images: list[str] | None = None,
) -> list[K8sJob]:
    """The Jobs of `envbuild ci k8s`: per target, per platform build, per GPU type (one with no
    product selector when none is given)."""
    types = [check_label_value(t, "--gpu-type") for t in gpu_types or []]
    on_gpu = spec.smoke.device == "gpu"
    if types and not on_gpu:
        raise UsageError(
            f'--gpu-type {types[0]!r}: {spec.path} runs its smoke step on CPU ([smoke] device = "cpu")',
            fix='drop --gpu-type, or set [smoke] device = "gpu" in the spec',
        )
    selectors = dict(check_selector(item) for item in node_selectors or [])
    if runtime_class is not None:
        check_name(runtime_class, "--runtime-class", _DNS_SUBDOMAIN, 253)
    if namespace is not None:
        check_name(namespace, "--namespace", _DNS_LABEL, 63)
    if pull_secret is not None:
        check_name(pull_secret, "--image-pull-secret", _DNS_SUBDOMAIN, 253)
    all_builds = builds(matrix, spec)
    refs = image_refs(images or [], [build.key for build in all_builds])
    out = []
    for build in all_builds:
        target, key = build.target, build.key
        uid = strategy_for(target.stack.strategy).image_uid
        image = refs.get(key) or f"{spec.image.repository}@sha256:{PLACEHOLDER}"
        terms: list[dict] = []
        if on_gpu:  # the stack the image was built from: its driver floor, compat mode and kernels
            stack = build_plan(matrix, spec, target, platform=build.platform).stack
            terms = gpu_node_terms(
                stack.variant.arch_for(build.platform),
                native=stack.mode == "native",
                min_driver=stack.min_driver,
                where=f"{spec.path} target {target.name!r} ({build.platform})",
            )
        for gpu_type in types or [""]:
            name = job_name(key, gpu_type)
            node_selector = {ARCH_LABEL: build.arch, **selectors}
            if gpu_type:
                node_selector[GPU_PRODUCT_LABEL] = gpu_type
            document = job_document(
                name,
                image=image,
                uid=uid,
                spec=spec,
                precision=job_precision(matrix, spec, target, gpu_type),
                job_labels={APP_LABEL: APP, labels.TARGET: label_text(target.name), "envbuild.gpu": gpu_type},
                node_selector=node_selector,
                node_terms=terms,
                runtime_class=runtime_class,
                namespace=namespace,
                pull_secret=pull_secret,
            )
            out.append(K8sJob(name=name, build=key, gpu_type=gpu_type, document=document))
    return out


def job_precision(matrix: Matrix, spec: Spec, target: Target, gpu_type: str) -> str:
    """The precision a Job passes the smoke step: the one its GPU product (the --gpu-type label value,
    e.g. Tesla-V100-SXM2-16GB) has when the catalogue knows the product, else one every GPU of the
    target has, since the Job may land on any of them (resolve.precision; resolve and render warn)."""
    product = find_gpu(matrix, gpu_type) if gpu_type and spec.smoke.device == "gpu" else None
    if product is not None:
        return gpus_precision(spec.smoke.precision, (product,))
    return target_precision(matrix, spec.smoke, target.stack.gpus)


def job_document(
    name: str,
    *,
    image: str,
    uid: int,
    spec: Spec,
    precision: str,
    job_labels: dict[str, str],
    node_selector: dict[str, str],
    runtime_class: str | None,
    namespace: str | None,
    pull_secret: str | None,
    node_terms: list[dict] | None = None,
) -> dict:
    """One batch/v1 Job that runs the image's preflight guard, then the smoke program, once, as the
    image's non-root user; `precision`: the smoke step's, as the Job's GPU has it (job_precision);
    `node_terms`: the GPU nodes it may run on (gpu_node_terms), none for a CPU Job."""
    smoke = spec.smoke
    on_gpu = smoke.device == "gpu"
    job_labels = {k: v for k, v in job_labels.items() if v}
    # a CPU smoke step's guard only warns (preflight.smoke_environment: a GPU node shows its driver to
    # every container), as under `envbuild verify`
    preflight_env = [{"name": k, "value": v} for k, v in smoke_environment(smoke.device, None).items()]
    container = {
        "name": "smoke",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(container_command()),
        "args": list(smoke_command(smoke.device, smoke.steps, precision)),  # python /opt/envbuild/smoke.py
        "env": [
            {"name": "HOME", "value": "/tmp"},
            {"name": "TMPDIR", "value": "/tmp"},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            *preflight_env,
        ],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": uid,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    if on_gpu:
        container["resources"] = {"limits": {GPU_RESOURCE: 1}}
    pod: dict = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid},
        "nodeSelector": node_selector,
        **(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_terms}
                    }
                }
            }
            if node_terms
            else {}
        ),
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    if pull_secret:
        pod["imagePullSecrets"] = [{"name": pull_secret}]
    metadata: dict = {"name": name} | ({"namespace": namespace} if namespace else {}) | {"labels": job_labels}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": smoke.timeout + PULL_ALLOWANCE_S,
            "ttlSecondsAfterFinished": TTL_S,
            "template": {"metadata": {"labels": job_labels}, "spec": pod},
        },
    }


def container_command() -> tuple[str, ...]:
    """The container's command, before the smoke program (its `args`): the image's preflight guard
    (GUARD_COMMAND), whose one-line verdict is then the pod log's first line, and the smoke program
    after it through `exec "$@"`, so its report stays the log's last line (`verify --from-log`) and its
    exit status is the pod's. The guard's stop (STOP_STATUS) ends the Job with that status before the
    smoke step; any other failure of the guard command (an image built before the guard, or a bug in
    it) is said on stderr and the smoke step runs, as the guard itself never stops a program for its
    own failure. The script is fixed text: no value of the spec or the command line is in it."""
    guard = " ".join(shell_word(word) for word in GUARD_COMMAND)
    stop = shell_word(STOP_STATUS)
    script = (
        f"{guard} || {{ status=$?; "
        f'if [ "$status" -eq {stop} ]; then echo "envbuild verify: the image\'s preflight guard refused '
        f'this node (exit {stop}); the smoke step did not run" >&2; exit {stop}; fi; '
        f'echo "envbuild verify: no preflight verdict ({guard} exited $status); running the smoke '
        f'step" >&2; }}; exec "$@"'
    )
    return (SHELL, "-c", script, APP)  # APP: the script's $0, in the shell's own messages


def gpu_node_terms(arch: ArchList, *, native: bool, min_driver: tuple[int, ...], where: str) -> list[dict]:
    """Node affinity terms (nodeSelectorTerms, ORed) for the GPU nodes an image can run on, on GPU
    Feature Discovery's labels: the same judgement as the image's preflight guard, made by the
    scheduler, so a Job never lands on a node where the guard would stop it (exit 78) and a pool of
    only such nodes leaves it Pending with the reason in `kubectl describe`, not a failed run.

    Kernels: ArchList.covers, written as label ranges. A SASS arch M.m runs on M.x for x >= m, so each
    SASS major gets one term, `compute.major In [M]` with `compute.minor Gt m-1` from its lowest minor
    (no minor bound when m is 0); under native compatibility PTX for P.p JIT-compiles for every arch
    >= P.p: `compute.major Gt P`, and `compute.major In [P]` + `compute.minor Gt p-1`. Only the lowest
    PTX arch counts (it covers what any higher one does), a same-major range keeps its lowest minor,
    and a major above the PTX arch is already covered, so the terms are minimal; sorted by major.
    Under minor-version compatibility the driver cannot JIT PTX newer than itself: SASS alone counts.

    Driver: `cuda.driver.major Gt <floor major - 1>`. Terms are ORed, so each carries it. The label
    holds the major only: a node of the floor's major but an older minor still passes the scheduler
    and meets the guard, which reads the whole version."""
    lowest: dict[int, int] = {}
    for major, minor in arch.sass:
        lowest[major] = min(minor, lowest.get(major, minor))
    above: int | None = None  # every major above this one runs the PTX
    if native and arch.ptx:
        ptx_major, ptx_minor = min(arch.ptx)
        lowest[ptx_major] = min(ptx_minor, lowest.get(ptx_major, ptx_minor))
        above = ptx_major
    if not lowest:
        raise UsageError(
            f"{where}: its build carries no kernels this stack can run ({arch.describe() or 'no arch list'}"
            + ("" if native else ", and PTX does not count under minor-version compatibility")
            + "), so no GPU node could run its smoke step",
            fix='set [smoke] device = "cpu", or pick a stack whose build has SASS for the GPUs '
            "(`envbuild resolve` shows each stack's arch list)",
        )
    driver = {"key": DRIVER_MAJOR_LABEL, "operator": "Gt", "values": [str(min_driver[0] - 1)]}
    terms = []
    for major, minor in sorted(lowest.items()):
        if above is not None and major > above:
            continue
        expressions = [driver, {"key": COMPUTE_MAJOR_LABEL, "operator": "In", "values": [str(major)]}]
        if minor > 0:
            expressions.append({"key": COMPUTE_MINOR_LABEL, "operator": "Gt", "values": [str(minor - 1)]})
        terms.append({"matchExpressions": expressions})
    if above is not None:
        terms.append(
            {
                "matchExpressions": [
                    driver,
                    {"key": COMPUTE_MAJOR_LABEL, "operator": "Gt", "values": [str(above)]},
                ]
            }
        )
    return terms


def write_jobs(matrix: Matrix, spec: Spec, out_dir: str, **options: object) -> list[str]:
    """`envbuild ci k8s -o DIR`: DIR/<job>.yaml per Job; every Job is made before any is written."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"-o {out_dir} exists and is not a directory", fix="pass a directory path")
    made = jobs(matrix, spec, **options)  # type: ignore[arg-type]
    written = []
    for job in made:
        path = os.path.join(out_dir, f"{job.name}.yaml")
        header = (
            f"# envbuild {COMMAND}: the smoke step of build {job.build!r}"
            + (f" on {job.gpu_type}" if job.gpu_type else "")
            + f"; validated against Kubernetes {K8S_VERSION}\n"
        )
        emit(path, header + to_yaml(job.document))
        written.append(path)
    return written


def job_name(build: str, gpu_type: str) -> str:
    """envbuild-verify-<build>[-<gpu type>] as an RFC 1123 label (a Job's name becomes its pods'
    `job-name` label, so at most 63 characters): lowercased, `_` and `.` as `-`; a longer one keeps
    its start and ends in a hash of the whole."""
    words = [APP, build] + ([gpu_type] if gpu_type else [])
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(words).lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)
    if len(name) > 63:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = name[:54].rstrip("-") + "-" + digest
    return name


def label_text(value: str) -> str:
    """A target name as a label value: target names are lowercase letters, digits, _ . - already; a
    long one is cut to 63."""
    return value[:63].rstrip("-_.")


def image_refs(values: list[str], builds: list[str]) -> dict[str, str]:
    """--image BUILD=REPO@sha256:<64 hex>, checked: the build must be one of the spec's, the image
    pinned by a sha256 digest and nothing else (no tag, no whitespace, no second line)."""
    refs: dict[str, str] = {}
    for value in values:
        key, sep, ref = value.partition("=")
        if not sep or key not in builds:
            raise UsageError(
                f"--image {value!r}: expected BUILD=REPO@sha256:<64 hex>, BUILD one of {', '.join(builds)}",
                fix="pass the digest `envbuild build --push` printed for that build",
            )
        repo, at, digest = ref.partition("@")
        if not at or not DIGEST_RE.fullmatch(digest) or not _repository(repo):
            raise UsageError(
                f"--image {value!r}: the image must be REPO@sha256:<64 lowercase hex>, with no tag",
                fix="pass the digest `envbuild build --push` printed for that build",
            )
        refs[key] = ref
    return refs


def _repository(repo: str) -> bool:
    from envbuild.spec.validate import repository

    try:
        repository(repo)
    except ValueError:
        return False
    return True


def check_name(value: str, flag: str, pattern: re.Pattern[str], limit: int) -> str:
    """An RFC 1123 name (label or subdomain) of at most `limit` characters, else a UsageError."""
    if len(value) > limit or not pattern.fullmatch(value):
        kind = "label" if pattern is _DNS_LABEL else "subdomain"
        raise UsageError(
            f"{flag} {value!r} is not an RFC 1123 {kind} name (lowercase letters, digits, '-'"
            + ("" if kind == "label" else ", '.'")
            + f"; at most {limit} characters)",
            fix=f"pass the name as the cluster spells it, e.g. {flag} gpu-jobs",
        )
    return value


def check_label_value(value: str, flag: str) -> str:
    """A Kubernetes label value: at most 63 of letters, digits, - _ . starting and ending alphanumeric."""
    if not value or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise UsageError(
            f"{flag} {value!r} is not a Kubernetes label value (letters, digits, - _ ., starting and "
            "ending with a letter or digit, at most 63)",
            fix=f"pass the node label's value, e.g. {flag} NVIDIA-H100-80GB-HBM3 "
            "(`kubectl get nodes -L nvidia.com/gpu.product`)",
        )
    return value


def check_selector(item: str) -> tuple[str, str]:
    """--node-selector KEY=VALUE: KEY a label key ([DNS subdomain/]name), VALUE a label value."""
    key, sep, value = item.partition("=")
    prefix, slash, name = key.rpartition("/")
    valid_key = (
        bool(sep)
        and len(name) <= 63
        and bool(_LABEL_NAME.fullmatch(name))
        and (not slash or (len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(prefix))))
    )
    if not valid_key:
        raise UsageError(
            f"--node-selector {item!r}: expected KEY=VALUE with KEY a Kubernetes label key "
            "([prefix/]name, e.g. cloud.google.com/gke-accelerator)",
            fix="pass the node label as `kubectl get nodes --show-labels` shows it",
        )
    if value:  # an empty value is a valid label value too
        check_label_value(value, f"--node-selector {key}=")
    return key, value


def to_yaml(value: object, indent: int = 0) -> str:
    """Block-style YAML of dicts, lists and scalars; every scalar through quoting.yaml_scalar, so each
    reads back as exactly its value."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{yaml_scalar(key)}:\n{to_yaml(item, indent + 2)}")
            else:
                lines.append(f"{pad}{yaml_scalar(key)}: {_empty_or_scalar(item)}\n")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)) and item:
                inner = to_yaml(item, indent + 2)
                lines.append(f"{pad}- {inner[indent + 2 :]}")
            else:
                lines.append(f"{pad}- {_empty_or_scalar(item)}\n")
    return "".join(lines)


def _empty_or_scalar(item: object) -> str:
    if isinstance(item, dict):
        return "{}"
    if isinstance(item, list):
        return "[]"
    return yaml_scalar(item)
