"""The argument parser: every command's flags, with the options several commands share defined once.

Only the command being run gets its arguments: `envbuild resolve` does not pay for building the
parsers of the fourteen other commands (about 2.5 ms, most of its start-up budget), and the
smoke defaults `verify` and `smoke` show are imported only when one of them runs. `envbuild --help`
still lists every command, from the table below.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

from envbuild import __version__

SPEC_FILE = "envbuild.toml"
OUTPUT_DIR = "build"


class _HelpFormatter(argparse.HelpFormatter):
    """argparse sizes help with shutil, whose import costs every `envbuild resolve` ~3 ms."""

    def __init__(self, prog: str, **kwargs) -> None:
        try:
            columns = os.get_terminal_size().columns
        except OSError:
            columns = 80
        kwargs.setdefault("width", max(columns - 2, 40))
        super().__init__(prog, **kwargs)


# --- the options several commands share --------------------------------------------------------


def add_spec_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", default=SPEC_FILE, metavar="SPEC", help=f"default: {SPEC_FILE}")


def add_matrix(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--matrix",
        metavar="DIR",
        help="compatibility data to use (default: the bundled matrix/; also ENVBUILD_MATRIX)",
    )


def add_json(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what}")


def add_base_image(parser: argparse.ArgumentParser, *, env: str | None = None) -> None:
    parser.add_argument(
        "--base-image",
        metavar="REF",
        help="replace the base image (mirrors, private registries)" + (f"; also {env}" if env else ""),
    )


def add_target(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup, help: str) -> None:
    parser.add_argument("--target", metavar="NAME", help=help)


def add_output_dir(parser: argparse.ArgumentParser, *, env: str | None = None) -> None:
    """-o DIR; with `env`, its default is None (the command layers it: the variable, then build/)."""
    if env is None:
        parser.add_argument(
            "-o", "--output", default=OUTPUT_DIR, metavar="DIR", help=f"default: {OUTPUT_DIR}/"
        )
    else:
        parser.add_argument("-o", "--output", metavar="DIR", help=f"default: {env}, else {OUTPUT_DIR}/")


def add_lock_key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lock-key-file",
        metavar="FILE",
        help="HMAC key that signs (lock) or must have signed (render, build, lock --check) "
        "envbuild.lock; also ENVBUILD_LOCK_KEY",
    )


def add_skip_audit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--skip-audit",
        action="append",
        default=[],
        metavar='LIBRARY="REASON"',
        help="do not judge this library (a file name: libtorch_cuda.so) in the audit, for this reason; "
        "recorded in the report, record.json and the SBOM (repeatable; adds to the spec's [audit] skip)",
    )


def add_sign_key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sign-key",
        metavar="FILE",
        help="PEM Ed25519 or ECDSA private key: the SBOM and provenance attached with --push are DSSE "
        "envelopes it signs (password: ENVBUILD_SIGN_KEY_PASSWORD)",
    )


def add_allow_edited_lock(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-edited-lock",
        action="store_true",
        help="emergencies only: use an envbuild.lock whose content digest or HMAC does not match, "
        "with a warning",
    )


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from low to high. argparse turns its refusal into exit 2 with
    `argument --FLAG: ...`, so the message names the flag, the range and the value given: a smoke step
    of 0 steps or a 0 s timeout cannot pass, it can only fail in a confusing way later."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}, got {text!r}")
        return value

    parse.__name__ = "whole number"  # what argparse calls the type in its own messages
    return parse


def add_smoke_limits(parser: argparse.ArgumentParser, *, from_image: bool = False) -> None:
    """--steps and --timeout of a smoke step (verify, smoke), in the ranges the spec's [smoke] takes.
    from_image (verify): not given is None, so the image's label can decide (spec.smokelabels); else
    --steps not given is None (the program's own default) and --timeout is the default."""
    from envbuild.smoke import DEFAULT_STEPS, DEFAULT_TIMEOUT_S, STEPS_RANGE, TIMEOUT_RANGE_S

    default = "the image's label, else " if from_image else ""
    parser.add_argument(
        "--steps",
        type=bounded_int(*STEPS_RANGE),
        default=None,
        metavar="N",
        help=f"training steps, {STEPS_RANGE[0]}-{STEPS_RANGE[1]} (default {default}{DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--timeout",
        type=bounded_int(*TIMEOUT_RANGE_S),
        default=None if from_image else DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds, {TIMEOUT_RANGE_S[0]}-{TIMEOUT_RANGE_S[1]} (default {default}{DEFAULT_TIMEOUT_S})",
    )


def spec_value(check: Callable[[str], str], name: str) -> Callable[[str], str]:
    """An argparse type: a value by the rule its [smoke] key has in the spec (envbuild.spec.validate).
    argparse turns the refusal into exit 2 with `argument --FLAG: ...` and what is accepted."""

    def parse(text: str) -> str:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r} {exc}") from None

    parse.__name__ = name
    return parse


def add_smoke_checks(parser: argparse.ArgumentParser, *, flag: str) -> None:
    """The checks a smoke step runs after its training step ([smoke] imports and command): `flag`-import
    and `flag`-command, each replacing the image's own of its kind (verify) or naming them (smoke)."""
    from envbuild.spec import validate

    parser.add_argument(
        f"--{flag}import",
        dest="smoke_imports",
        action="append",
        type=spec_value(validate.smoke_import, "module name"),
        metavar="MODULE",
        help="a module to import after the training step, as [smoke] imports (repeatable)",
    )
    parser.add_argument(
        f"--{flag}command",
        dest="smoke_command",
        type=spec_value(validate.smoke_command_line, "command"),
        metavar="CMD",
        help="a command to run after the training step, as [smoke] command (run without a shell)",
    )


def add_wheelhouse(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--wheelhouse", metavar="DIR", help=help)


def add_bundle(parser: argparse.ArgumentParser, help: str) -> None:
    """--bundle BUNDLE (issue 38): `envbuild vendor`'s directory; not with --wheelhouse (exit 2)."""
    parser.add_argument("--bundle", metavar="BUNDLE", help=help)


# --- one function per command: its arguments ----------------------------------------------------


def _resolve(parser: argparse.ArgumentParser) -> None:
    from envbuild.matrix.model import COMPAT_MODES, STRATEGIES

    parser.add_argument(
        "--driver",
        metavar="VERSION",
        help="host driver: 550, R550, 550.54 or 550.54.15 (a bare branch means "
        "a current driver of that branch); required unless -f is given",
    )
    parser.add_argument(
        "-f",
        "--file",
        metavar="SPEC",
        help="explain each target of this envbuild.toml: its [stack] and [[target]] fields are the "
        "query; flags given beside it override the field of the same name",
    )
    add_target(parser, "with -f: only this [[target]] (default: all)")
    parser.add_argument(
        "--gpu",
        action="append",
        metavar="NAME_OR_CC",
        default=[],
        help="a GPU the stack must run on: H100, 'RTX 4090', L4, sm_89, 8.9 (repeatable)",
    )
    parser.add_argument(
        "--framework",
        action="append",
        metavar="NAME[SPEC]",
        default=[],
        help="torch, tensorflow or jax, with an optional PEP 440 specifier, "
        "e.g. 'torch==2.5.*' (repeatable; repeats of one framework are OR'ed; default: best of each)",
    )
    parser.add_argument("--python", metavar="X.Y", help="Python version the stack must support")
    parser.add_argument("--cuda", metavar="SPEC", help="CUDA runtime constraint: 12.4, '>=12.1'")
    parser.add_argument(
        "--compat",
        choices=COMPAT_MODES,
        help="native (default) or minor: also allow same-major CUDA through minor-version compatibility",
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="stacks to show per framework (default 1, or 5 with --framework)",
    )
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        help="only stacks that fit this CUDA strategy (wheels: the framework brings its CUDA runtime; "
        "base-image: an nvidia/cuda cuDNN image exists for it)",
    )
    parser.add_argument(
        "--os", metavar="NAME", help="base OS for --strategy base-image (default ubuntu22.04)"
    )
    parser.add_argument(
        "--platform",
        metavar="PLATFORM",
        help="only builds published for linux/amd64 or linux/arm64 (default: what the GPUs imply, "
        "e.g. GB200 -> linux/arm64, else linux/amd64)",
    )
    add_json(parser, "JSON instead of text")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every rejected candidate, not the first few per reason",
    )
    add_matrix(parser)


def _render(parser: argparse.ArgumentParser) -> None:
    add_spec_file(parser)
    add_output_dir(parser)
    add_target(parser, "only this [[target]] (default: all)")
    add_base_image(parser)
    add_wheelhouse(parser, "air-gapped: copy these wheels into the context and install with --no-index")
    add_bundle(parser, "air-gapped from `envbuild vendor`'s bundle: its wheels, and FROM its base (loaded)")
    parser.add_argument("--stdout", action="store_true", help="print the Dockerfile(s) instead of writing")
    parser.add_argument(
        "--apptainer",
        action="store_true",
        help="also write envbuild.def next to each Dockerfile: an Apptainer definition from the pushed "
        "image by digest (docs/ci.md)",
    )
    parser.add_argument(
        "--builder",
        choices=("buildkit", "api"),
        default="buildkit",
        help="render for BuildKit (default: RUN --mount for wheelhouses) or the classic builder",
    )
    add_lock_key(parser)
    add_allow_edited_lock(parser)
    add_matrix(parser)


def _init(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "-o",
        "--file",
        "--output",
        dest="file",
        default=SPEC_FILE,
        metavar="SPEC",
        help=f"the file to write, in a folder that exists (default: {SPEC_FILE})",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    parser.add_argument(
        "--driver",
        metavar="VERSION",
        help="the driver your nodes run (default: nvidia-smi's, else the current LTS branch)",
    )
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="NAME_OR_CC",
        help="a GPU the image must run on (repeatable; default: nvidia-smi's GPUs)",
    )
    add_matrix(parser)


def _lock(parser: argparse.ArgumentParser) -> None:
    add_spec_file(parser)
    add_target(parser, "relock (with --check: check) only this target")
    parser.add_argument(
        "--upgrade",
        nargs="*",
        metavar="PKG",
        help="allow newer versions: of these packages, or of everything when none are named",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write: exit 1 listing what changed when spec, matrix or lock disagree; "
        "re-resolves every package against the indexes",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="with --check: compare without asking the indexes (hashes and versions are then "
        "trusted to the content digest and the HMAC)",
    )
    add_json(parser, "with --check: the problems as JSON on stdout (same exit codes)")
    add_lock_key(parser)
    add_base_image(parser)
    parser.add_argument(
        "--pylock",
        action="store_true",
        help="also export each target as PEP 751 pylock.<target>.toml next to the lock",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress lines on stderr (errors and warnings still print)",
    )
    add_matrix(parser)


def _vendor(parser: argparse.ArgumentParser) -> None:
    add_spec_file(parser)
    add_target(parser, "vendor only this target (each of its locked platforms)")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="BUNDLE",
        help="the bundle directory (created; files already there with the right hash are kept)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines on stderr (errors still print)"
    )


def _build(parser: argparse.ArgumentParser) -> None:
    from envbuild.smoke import DEVICES

    # each setting: its flag, else its ENVBUILD_* variable, else envbuild.toml, else the default
    # (stages.settings); a flag's default is None, so the settings can tell "not given" from a value
    add_spec_file(parser)
    which = parser.add_mutually_exclusive_group()
    add_target(which, "build this [[target]]")
    which.add_argument("--all", action="store_true", help="build every target and print a summary")
    add_engine(parser, spec=True)
    parser.add_argument(
        "--smoke-device",
        choices=DEVICES,
        help="default: ENVBUILD_SMOKE_DEVICE, else [smoke] device (gpu)",
    )
    add_gpu_access(parser)
    add_base_image(parser, env="ENVBUILD_BASE_IMAGE")
    add_wheelhouse(parser, "air-gapped: install from these wheels; also ENVBUILD_WHEELHOUSE")
    add_bundle(
        parser, "air-gapped from `envbuild vendor`'s bundle (no registry, no index); also ENVBUILD_BUNDLE"
    )
    parser.add_argument(
        "--push",
        action="store_true",
        default=None,
        help="push every tag of a verified image; also ENVBUILD_PUSH=1",
    )
    parser.add_argument(
        "--builder",
        choices=("auto", "api", "buildkit"),
        help="buildkit (docker CLI), api (Engine API, classic builder) or auto (default; also "
        "ENVBUILD_BUILDER)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        default=None,
        help="build without the layer cache; also ENVBUILD_NO_CACHE=1",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        metavar="N",
        help="build N targets at once against one engine (with --all; default 1, also ENVBUILD_JOBS)",
    )
    add_output_dir(parser, env="ENVBUILD_OUTPUT")
    add_lock_key(parser)
    add_allow_edited_lock(parser)
    add_sign_key(parser)
    add_skip_audit(parser)
    add_matrix(parser)


def add_engine(parser: argparse.ArgumentParser, *, spec: bool = False) -> None:
    from envbuild.spec.model import ENGINES

    where = ", else [build] engine in envbuild.toml" if spec else ""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        help=f"the container engine, docker or podman (default: ENVBUILD_ENGINE{where}, else docker)",
    )


def add_gpu_access(parser: argparse.ArgumentParser) -> None:
    from envbuild.engine.cdi import GPU_ACCESS

    parser.add_argument(
        "--gpu-access",
        choices=GPU_ACCESS,
        help="how a GPU smoke step reaches the GPUs with Docker: cdi (the nvidia.com/gpu=all CDI device), "
        "legacy (the toolkit's device request), or auto (default; also ENVBUILD_GPU_ACCESS): cdi when a "
        "CDI spec in /etc/cdi or /var/run/cdi names it",
    )


def _verify(parser: argparse.ArgumentParser) -> None:
    from envbuild.runtime import DEFAULT_RUNTIME, RUNTIMES
    from envbuild.smoke import DEFAULT_PRECISION, DEVICES, PRECISIONS

    # the smoke settings: a flag, else the image's io.envbuild.spec.smoke.* label (what render wrote from
    # the spec's [smoke]), else the default; verify prints which, and --record keeps it
    parser.add_argument("image", metavar="IMAGE")
    parser.add_argument(
        "--smoke-device", choices=DEVICES, help="default: the image's label, else gpu (with --from-log: gpu)"
    )
    add_engine(parser)
    add_gpu_access(parser)
    parser.add_argument(
        "--precision", choices=PRECISIONS, help=f"default: the image's label, else {DEFAULT_PRECISION}"
    )
    add_smoke_limits(parser, from_image=True)
    add_smoke_checks(parser, flag="smoke-")  # default: the image's own [smoke] checks
    parser.add_argument(
        "--report", metavar="FILE", help="write {image, device, report, report-digest} here for `promote`"
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="write what ran here: runtime, host, Slurm job, timings, gates, the report's digest",
    )
    parser.add_argument(
        "--runtime",
        choices=RUNTIMES,
        help=f"what runs the smoke container (default: {DEFAULT_RUNTIME}); the others take REPO@sha256:... "
        "(docs/ci.md: Verify on a Slurm cluster). With --from-log: what ran it (default: kubernetes)",
    )
    parser.add_argument(
        "--from-log",
        metavar="FILE",
        help="run nothing: judge the smoke output in FILE (`kubectl logs job/NAME`) for IMAGE, "
        "REPO@sha256:... (docs/ci.md: Verify on Kubernetes)",
    )
    parser.add_argument(
        "--gpu",
        action="append",
        metavar="NAME_OR_CC",
        default=[],
        help="audit the image's kernels for this GPU before the smoke step; exit 1 when it has no kernel "
        "image (repeatable)",
    )
    add_matrix(parser)  # where --gpu names are looked up, as `envbuild build --matrix` does
    add_skip_audit(parser)
    add_json(parser, "the report as JSON")


def _promote(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "image",
        nargs="+",
        metavar="IMAGE",
        help="the image; with --to, one REPO@sha256:... per platform pushes a multi-platform index",
    )
    parser.add_argument(
        "--report",
        action="append",
        metavar="FILE",
        help="written by envbuild verify --report (local promotion); with several images, one per image",
    )
    parser.add_argument(
        "--to",
        nargs="+",
        action="extend",
        metavar="TAG",
        help="registry-side: copy the manifest of IMAGE (REPO@sha256:...) to these tags; the "
        "image must carry envbuild's verified label",
    )
    parser.add_argument("--tag", action="append", default=[], metavar="REPO:TAG", help="repeatable")
    parser.add_argument(
        "--push", action="store_true", help="push the tags, with the image's SBOM and provenance attached"
    )
    add_engine(parser)
    add_sign_key(parser)


def _attest(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", metavar="IMAGE", help="REPO@sha256:... or REPO:TAG in a registry")
    parser.add_argument("--key", metavar="PUB", help="PEM public key every document must be signed with")
    parser.add_argument(
        "--attach",
        action="store_true",
        help="build the SBOM and provenance of IMAGE (pulled if not local) and attach them, instead of "
        "checking",
    )
    facts = parser.add_mutually_exclusive_group()
    facts.add_argument(
        "--record", metavar="FILE", help="with --attach: the build's record.json (its facts and lock hashes)"
    )
    facts.add_argument(
        "--report",
        metavar="FILE",
        help="with --attach and no record: the smoke report file of `envbuild verify --report` (the lock's "
        "hashes come from the spec's envbuild.lock)",
    )
    add_spec_file(parser)
    add_sign_key(parser)
    add_json(parser, "the checks as JSON")


def _bake(parser: argparse.ArgumentParser) -> None:
    add_spec_file(parser)
    parser.add_argument(
        "-o", "--output", default="docker-bake.json", metavar="FILE", help="default: docker-bake.json"
    )
    parser.add_argument(
        "--contexts",
        default=OUTPUT_DIR,
        metavar="DIR",
        help=f"where render wrote them (default {OUTPUT_DIR})",
    )
    add_matrix(parser)


def add_generator_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the committed file(s) differ from what this command would "
        "write now (the same options)",
    )


def _ci_common(parser: argparse.ArgumentParser) -> None:
    """The options `ci github` and `ci gitlab` share: what every job installs and passes on."""
    parser.add_argument(
        "--install",
        metavar="SOURCE",
        help="what CI pip-installs envbuild from: 'envbuild==X' (your index), a git+https:// URL or a "
        "path in the repository (default: where this envbuild was installed from, if a runner can "
        "reach it; envbuild is not on PyPI)",
    )
    add_base_image(parser)
    add_matrix(parser)
    add_generator_check(parser)


def _ci_github(parser: argparse.ArgumentParser) -> None:
    add_spec_file(parser)
    parser.add_argument("-o", "--output", default=".github/workflows/envbuild.yml", metavar="FILE")
    parser.add_argument(
        "--gpu-label",
        action="append",
        metavar="LABEL",
        help="runner labels for the verify job (default: self-hosted, gpu, sm_XY of the targets)",
    )
    parser.add_argument(
        "--action-pins",
        metavar="FILE",
        help="pin every action by commit SHA: lines of 'owner/repo@ref = <40-hex sha>' (docs/ci.md)",
    )
    parser.add_argument(
        "--qemu",
        action="store_true",
        help="build arm64 targets on x86_64 runners under QEMU, not on GitHub's arm64 runners "
        "(several times slower; docs/ci.md)",
    )
    parser.add_argument(
        "--sign-key-secret",
        metavar="NAME",
        help="sign envbuild's attached SBOM and provenance with the PEM private key in this repository "
        "secret (Ed25519 or ECDSA; docs/ci.md)",
    )
    _ci_common(parser)


def _ci_gitlab(parser: argparse.ArgumentParser) -> None:
    add_spec_file(parser)
    parser.add_argument("-o", "--output", default=".gitlab-ci.yml", metavar="FILE")
    parser.add_argument(
        "--gpu-tag",
        action="append",
        metavar="TAG",
        help="runner tags for the verify jobs (default: gpu, plus sm_XY of the targets)",
    )
    _ci_common(parser)


def _ci_k8s(parser: argparse.ArgumentParser) -> None:
    add_spec_file(parser)
    parser.add_argument(
        "-o", "--output", default="k8s", metavar="DIR", help="one <job>.yaml per Job (default k8s)"
    )
    parser.add_argument(
        "--image",
        action="append",
        metavar="BUILD=REPO@sha256:...",
        help="the candidate each build's Jobs run, by digest (default: REPO@sha256:DIGEST, to fill in)",
    )
    parser.add_argument(
        "--gpu-type",
        action="append",
        metavar="NAME",
        help="one Job per GPU type, on nodes labelled nvidia.com/gpu.product=NAME (repeatable)",
    )
    parser.add_argument(
        "--node-selector", action="append", metavar="KEY=VALUE", help="a node label every Job asks for"
    )
    parser.add_argument("--runtime-class", metavar="NAME", help="the Pods' runtimeClassName (e.g. nvidia)")
    parser.add_argument("--namespace", metavar="NS", help="the Jobs' namespace (default: kubectl's)")
    parser.add_argument("--image-pull-secret", metavar="NAME", help="the Secret the kubelet pulls with")
    add_matrix(parser)
    add_generator_check(parser)


def _ci_slurm(parser: argparse.ArgumentParser) -> None:
    from envbuild.runtime import RUNTIMES
    from envbuild.scaleout.slurm import DEFAULT_GRES, DEFAULT_RUNTIME, DEFAULT_TIME

    add_spec_file(parser)
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="where the scripts go")
    parser.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default=DEFAULT_RUNTIME,
        help=f"what runs the smoke container on the nodes (default: {DEFAULT_RUNTIME})",
    )
    parser.add_argument(
        "--partition",
        action="append",
        metavar="P",
        help="one verify job per target in each of these partitions (repeatable; default: the cluster's)",
    )
    parser.add_argument(
        "--gres",
        metavar="gpu:N",
        help=f"GPUs each verify job asks for (default {DEFAULT_GRES}; none for CPU smoke)",
    )
    parser.add_argument("--time", default=DEFAULT_TIME, metavar="HH:MM:SS", help="each job's time limit")
    parser.add_argument(
        "--shared-dir",
        metavar="DIR",
        help="absolute directory every node sees: reports, records, job logs (default: <-o DIR>/shared)",
    )
    parser.add_argument("--account", metavar="A", help="the Slurm account the jobs are charged to")
    add_matrix(parser)
    add_generator_check(parser)


def _doctor(parser: argparse.ArgumentParser) -> None:
    from envbuild.host.doctor import DEFAULT_TIMEOUT_S
    from envbuild.runtime import DEFAULT_RUNTIME, RUNTIMES

    subject = parser.add_mutually_exclusive_group()
    subject.add_argument(
        "--lock", metavar="PATH", help="judge the stacks of this envbuild.lock against this host"
    )
    subject.add_argument("--image", metavar="REF", help="judge this image (labels, NVIDIA_REQUIRE_CUDA)")
    parser.add_argument(
        "--bundle",
        metavar="BUNDLE",
        help="check this `envbuild vendor` bundle against --lock, else the lock beside -f SPEC, offline",
    )
    parser.add_argument(
        "-f",
        "--file",
        default=SPEC_FILE,
        metavar="SPEC",
        help=f"with --bundle: the spec whose envbuild.lock and installer judge it (default: {SPEC_FILE})",
    )
    parser.add_argument(
        "--no-gpu",
        dest="gpu",
        action="store_false",
        help="for CPU CI runners: check the Engine, BuildKit and --registry logins, no nvidia-smi",
    )
    parser.add_argument(
        "--registry",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="check the docker login for this registry as `docker login` would (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"one deadline for the whole run; checks it cuts off fail (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default=DEFAULT_RUNTIME,
        help="what `verify --runtime` will run containers with here (default: docker); another checks "
        "that runtime (binary, version, GPU path) instead of the Docker Engine and toolkit",
    )
    add_engine(parser)
    add_json(parser, "the checks as JSON")
    add_matrix(parser)


def _audit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", metavar="TARGET", help="a .so, a directory, a .whl, a local image or REPO@sha256:..."
    )
    parser.add_argument(
        "--gpu",
        action="append",
        metavar="NAME_OR_CC",
        default=[],
        help="a GPU to judge the kernels for (repeatable; default: the GPUs of the spec's targets)",
    )
    parser.add_argument(
        "--framework",
        choices=("torch", "tensorflow", "jax"),
        help="whose libraries decide the exit code (default: found from the libraries)",
    )
    add_skip_audit(parser)
    add_spec_file(parser)
    add_json(parser, "the audit as JSON")
    add_matrix(parser)


def _smoke(parser: argparse.ArgumentParser) -> None:
    from envbuild.smoke import DEFAULT_PRECISION, FRAMEWORKS, PRECISIONS

    parser.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        help=f"default: the first of {', '.join(FRAMEWORKS)} this Python can import",
    )
    parser.add_argument("--device", choices=("gpu", "cpu", "auto"), default="gpu", help="default: gpu")
    parser.add_argument("--precision", choices=PRECISIONS, help=f"default: {DEFAULT_PRECISION}")
    add_smoke_limits(parser)  # --steps None: the program's own default
    add_smoke_checks(parser, flag="")
    add_json(parser, "the report as JSON")


def _matrix_gpus(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "word",
        nargs="?",
        metavar="WORD",
        help="only rows whose name or an alias contains it (3060, 'rtx a', or a name nvidia-smi prints)",
    )
    parser.add_argument(
        "--cc",
        metavar="X.Y",
        help="only rows of this compute capability: 8.6, sm_86 or compute_86 (nvidia-smi's compute_cap)",
    )
    add_matrix(parser)
    add_json(
        parser,
        "the rows as JSON: name, aliases, compute_capability, architecture, segment, driver "
        "branches, bf16/fp16, memory_gb, source",
    )


def _matrix_refresh(parser: argparse.ArgumentParser) -> None:
    add_matrix(parser)
    parser.add_argument(
        "--source",
        metavar="LIST",
        help="comma-separated: pypi, pytorch-index, nvidia-cuda-tags (default: all)",
    )
    parser.add_argument(
        "--audit",
        nargs="?",
        const="all",
        metavar="FRAMEWORKS",
        help="check each PyPI-hosted row's arch list against the kernels in its wheels (range "
        "requests, cuobjdump); optionally only jax,tensorflow,torch; alone, only this runs",
    )
    parser.add_argument(
        "--requirements",
        action="store_true",
        help="measure matrix/requirements.toml: the CUDA-family requirements in the METADATA of each "
        "build's install wheel (range requests); alone, only this runs",
    )
    parser.add_argument("--write", action="store_true", help="apply the + and ? findings to the matrix files")
    add_json(parser, "the findings as JSON")
    parser.add_argument(
        "--pypi-url", metavar="URL", help="PyPI base URL (default https://pypi.org; also ENVBUILD_PYPI_URL)"
    )
    parser.add_argument(
        "--pytorch-index-url",
        metavar="URL",
        help="base of the per-CUDA PyTorch indexes (default https://download.pytorch.org/whl; "
        "also ENVBUILD_PYTORCH_INDEX_URL)",
    )
    parser.add_argument(
        "--cuda-repository",
        metavar="REPO",
        help="the nvidia/cuda repository to list (default docker.io/nvidia/cuda; "
        "also ENVBUILD_CUDA_REPOSITORY)",
    )
    parser.add_argument(
        "--timeout", type=float, default=30, metavar="S", help="seconds per request (default 30)"
    )


def _completion(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to write the script for")


SHELLS = ("bash", "zsh")  # shtab's tcsh script completes no subcommand's flags


class Command:
    """A command (or a group of subcommands) as `--help` lists it, and how to add its arguments."""

    __slots__ = ("add_arguments", "description", "help", "metavar", "name", "subcommands")

    def __init__(
        self,
        name: str,
        help: str,
        add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
        *,
        description: str | None = None,
        subcommands: tuple[Command, ...] = (),
        metavar: str = "",
    ) -> None:
        self.name = name
        self.help = help
        self.add_arguments = add_arguments
        self.description = description
        self.subcommands = subcommands
        self.metavar = metavar  # for a group: how --help names its subcommand


COMMANDS: tuple[Command, ...] = (
    Command(
        "init",
        "write a commented starter envbuild.toml",
        _init,
        description="Write a commented starter envbuild.toml (-f PATH, in a folder that exists) to edit, "
        "then `envbuild lock` and `envbuild render`. Refuses to replace an existing file unless --force.",
    ),
    Command(
        "resolve",
        "pick the best stack a driver runs, and say why the others were rejected",
        _resolve,
        description="Pick the best framework/CUDA stack an NVIDIA driver runs, and explain why "
        "every other candidate was rejected. Exit 0: found; 2: bad input; 3: none.",
    ),
    Command(
        "lock",
        "write envbuild.lock: exact versions, sha256 hashes, base image digests",
        _lock,
        description="Resolve every target's Python closure for linux x86_64 with uv (framework from its "
        "variant's index, the rest from the spec's), solve conda targets' conda packages with rattler, pin "
        "base images by digest through the registry API, and write envbuild.lock next to the spec. "
        "--check: exit 1 when the lock no longer matches.",
    ),
    Command(
        "vendor",
        "fetch everything envbuild.lock pins into a bundle directory, for an air-gapped build",
        _vendor,
        description="From envbuild.lock alone (no resolution): every locked wheel, uv's wheel for each "
        "platform, every locked conda package file and the base image by digest (an OCI image layout), "
        "each hash checked, into BUNDLE with its manifest bundle.json. Every URL goes through the spec's "
        "[mirrors]. Resumable: files already there with the right hash are kept. Exit 1: a fetch failed "
        "or a hash did not match; 2: bad input (no lock: run `envbuild lock` first).",
    ),
    Command(
        "render",
        "render Dockerfiles and conda specs from envbuild.toml",
        _render,
        description="Resolve each target of envbuild.toml and write its build context to DIR/<target>/: "
        "Dockerfile, requirement files or environment.yml, the smoke program, .dockerignore, stack.json.",
    ),
    Command(
        "build",
        "render, build, verify with the smoke step, and tag/push only what passed",
        _build,
        description="render -> build (untagged) -> verify (the smoke training step in a container) -> "
        "promote (label, tag, push). An image whose smoke step fails gets no tag. "
        "Writes build/<target>/record.json.",
    ),
    Command(
        "audit",
        "read the GPU kernels (SASS, PTX) compiled into a library, wheel or image, without a GPU",
        _audit,
        description="Lists each library's SASS and PTX and says, per GPU, whether it runs natively, "
        "through SASS of its major, through PTX JIT only, or fails with 'no kernel image is available'. "
        "Exit 1 when a GPU has no kernel image in a library the framework loads.",
    ),
    Command(
        "verify",
        "run the smoke training step in a container from IMAGE",
        _verify,
        description="Run /opt/envbuild/smoke.py in a throwaway container (no network, the image's user; "
        "with --smoke-device gpu all GPUs). Exit 0 when every gate passed.",
    ),
    Command(
        "promote",
        "label and tag (and push) an image whose smoke report passed",
        _promote,
        description="Add io.envbuild.verified labels to IMAGE (no new layer), tag it, and push with --push. "
        "Refuses unless --report holds a passing smoke report for this image "
        "(from `envbuild verify --report`).",
    ),
    Command(
        "attest",
        "check (or attach) an image's SBOM and provenance in its registry",
        _attest,
        description="Fetch the CycloneDX SBOM and SLSA provenance attached to IMAGE's digest (OCI referrers "
        "API, or the sha256-<hex> tag fallback) and check them: each names this digest, the SBOM validates, "
        "both name the same lock, the image's labels agree with both, and with --key every signature "
        "verifies. Exit 1 naming each check that failed. --attach builds and attaches them instead "
        "(`envbuild build --push` does it itself). See docs/attest.md.",
    ),
    Command(
        "bake",
        "write a docker buildx bake file (JSON) for every target",
        _bake,
        description="One bake target per [[target]]: its rendered context, the candidate tag envbuild verify "
        "finds, the labels, and a registry cache. Render the contexts first (envbuild render).",
    ),
    Command(
        "ci",
        "write CI workflows",
        description="Write a CI pipeline for the spec: lock-check, build on CPU runners, verify on GPU "
        "runners, promote by digest.",
        metavar="SYSTEM",
        subcommands=(
            Command(
                "github",
                "a GitHub Actions workflow: lock-check, build on CPU, verify on GPU, promote by digest",
                _ci_github,
                description="Write a GitHub Actions workflow (default .github/workflows/envbuild.yml): "
                "lock --check, build on CPU runners and push candidates by digest, verify on GPU runners "
                "labelled by architecture, promote inside the registry.",
            ),
            Command(
                "gitlab",
                "a .gitlab-ci.yml: lock-check, build on a Docker runner, verify on GPU, promote by digest",
                _ci_gitlab,
                description="Write a GitLab CI pipeline (default .gitlab-ci.yml): lock --check, render and "
                "build on a Docker runner and push candidates by digest, verify on GPU runners tagged by "
                "architecture, promote inside the registry. Merge requests run lock --check only.",
            ),
            Command(
                "k8s",
                "Kubernetes Jobs that run the smoke step of a candidate, by digest, on GPU nodes",
                _ci_k8s,
                description="Write one Kubernetes Job per target, platform and GPU type (default dir k8s): "
                "the candidate by digest, the smoke command, one nvidia.com/gpu, non-root with a read-only "
                "root filesystem. Collect `kubectl logs` and judge it with `envbuild verify --from-log` "
                "(docs/ci.md: Verify on Kubernetes).",
            ),
            Command(
                "slurm",
                "Slurm batch scripts: verify a candidate by digest on GPU nodes, then promote",
                _ci_slurm,
                description="Write batch scripts for a Slurm cluster into -o DIR: one verify job per target "
                "and partition (envbuild verify REPO@sha256:... --runtime R, report and record in the shared "
                "directory), a promote job, and submit.sh, which sbatches them with promote depending on "
                "every verify job (afterok). See docs/ci.md: Verify on a Slurm cluster.",
            ),
        ),
    ),
    Command(
        "doctor",
        "check this host: nvidia-smi, driver, GPUs, Docker or --runtime R; can it run a lock or image",
        _doctor,
        description="The field's host checklist, each line ok/warn/fail/skip with evidence and a fix. "
        "Exit 0 when nothing failed, 1 otherwise.",
    ),
    Command(
        "smoke",
        "run the smoke training step on this host (no container)",
        _smoke,
        description="Run the framework's smoke program with this Python: forward, backward and optimizer "
        "steps with gates for device, driver, arch, placement, training, precision, memory and multi-GPU. "
        "Exit 0 when every gate passed, 1 otherwise.",
    ),
    Command(
        "matrix",
        "inspect and validate the compatibility data",
        description="The compatibility facts envbuild resolves from (matrix/*.toml, or --matrix DIR): "
        "validate them, list the GPUs, or propose new rows from upstream.",
        metavar="ACTION",
        subcommands=(
            Command(
                "check",
                "validate the schema and cross-references of matrix/*.toml",
                add_matrix,
                description="Validate every matrix file's schema and cross-references (every variant "
                "names a known CUDA, every GPU name and alias reaches its own row, sources are URLs). "
                "Exit 0: valid; 1: the data has problems; 2: --matrix names no matrix directory.",
            ),
            Command(
                "gpus",
                "list the GPUs and their compute capabilities",
                _matrix_gpus,
                description="List every GPU the matrix knows, with its compute capability and aliases: "
                "the names --gpu and [stack] gpus accept. WORD and --cc narrow the list; names are "
                "matched as --gpu reads them (vendor, memory and form-factor words ignored). Exit 0: "
                "rows listed; 1: no row matches; 2: a bad --cc.",
            ),
            Command(
                "refresh",
                "propose new rows from PyPI, the PyTorch indexes and the nvidia/cuda tag list",
                _matrix_refresh,
                description="Read upstream and print the rows it proposes, each with its source URL and "
                "fetch date: + rows --write adds, ? rows --write adds commented out for a human to finish, "
                "! findings that are only reported. Nothing is written unless every edited file passes "
                "`matrix check`.",
            ),
        ),
    ),
    Command(
        "completion",
        "print a shell completion script for bash or zsh",
        _completion,
        description="Print a static completion script for every command and flag (generated by shtab "
        "from this parser). bash: `source <(envbuild completion bash)`, or write it to "
        "~/.local/share/bash-completion/completions/envbuild; zsh: write it as _envbuild into a "
        "directory on $fpath.",
    ),
)


def _add_commands(
    subparsers: argparse._SubParsersAction,
    commands: tuple[Command, ...],
    wanted: str | None,
    path: str,
    *,
    every: bool = False,
) -> dict[str, argparse.ArgumentParser]:
    """Add every command; arguments only for `wanted` (and all of its subcommands), or, with
    `every`, for all of them (completion scripts, tests)."""
    parsers = {}
    for command in commands:
        parser = subparsers.add_parser(
            command.name, formatter_class=_HelpFormatter, help=command.help, description=command.description
        )
        key = f"{path} {command.name}".strip()
        parser.set_defaults(command_path=key)
        parsers[key] = parser
        if command.name != wanted and not every:
            continue
        if command.subcommands:
            nested = parser.add_subparsers(dest=f"{command.name}_command", metavar=command.metavar)
            for sub in command.subcommands:
                parsers.update(_add_commands(nested, (sub,), sub.name, key, every=every))
        elif command.add_arguments is not None:
            command.add_arguments(parser)
    return parsers


def build_parser(
    argv: Sequence[str] = (), *, every: bool = False
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser for `argv` (its command's arguments filled in; with `every`, every command's), and
    every (sub)command's parser by path ("resolve", "matrix check"), so a group run without a
    subcommand can print its own help."""
    parser = argparse.ArgumentParser(
        prog="envbuild",
        formatter_class=_HelpFormatter,
        description="Reproducible, verified CUDA training environments.",
    )
    parser.add_argument("--version", action="version", version=f"envbuild {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = next((arg for arg in argv if not arg.startswith("-")), None)
    parsers = _add_commands(subparsers, COMMANDS, wanted, "", every=every)
    parsers[""] = parser
    return parser, parsers
