"""Batch scripts for a Slurm cluster (`envbuild ci slurm`), rendered from templates/ci/slurm/.

Most training GPUs sit in Slurm clusters, where containers run through Apptainer, Enroot or
Charliecloud rather than a Docker daemon. A build job elsewhere pushes a candidate by digest; these
scripts verify it on the cluster's GPU nodes and promote it from the report, registry-side:

- `verify-<target>-<partition>.sh`: one batch job per target and partition. It takes the candidate
  `REPO@sha256:...` (the spec's repository only, checked in the script), runs `envbuild verify
  --runtime R` with the spec's [smoke] settings and writes report.json and record.json under
  `<shared>/<target>/<partition>/`.
- `promote.sh`: `envbuild promote REPO@sha256:... --to <final tags> --report ...` per target.
- `submit.sh TARGET=REPO@sha256:... ...`: sbatches every verify job (--parsable), then promote with
  `--dependency=afterok:<ids> --kill-on-invalid-dep=yes`, so a failed verify cancels promote rather
  than leaving it pending, and prints the job ids.

The values come from scaleout.ciplan (targets, final tags, smoke settings). Values that land in
`#SBATCH` lines (partition, account, time, gres, the shared directory) are checked against strict
patterns here, because sbatch reads those lines itself, not a shell; every value in a shell line is
also one shell word (scaleout.quoting.shell_word). Targets with several platforms are refused: one
cluster verifies one machine's image, and a multi-platform index needs every platform's report.

With `--runtime enroot`, each verify job also gets a pyxis variant, `verify-<target>-<partition>.pyxis.sh`
(`submit.sh --pyxis` sends those): `srun --container-image=REGISTRY#REPO@sha256:...` runs the smoke
program in the candidate the way the cluster's training jobs run, and envbuild on the node judges its
output with `verify --from-log --runtime enroot` (the same schema and gates), so promotion reads the
report as any other. Sites with pyxis need no Enroot knowledge in the job, and no scratch space for it.

The image's preflight guard (envbuild.preflight) is each verify job's first verdict, a line of the job's
log naming the node: the pyxis variant runs GUARD_COMMAND as its own step in the image's named
container (imported once for both steps) and ends the job with STOP_STATUS on a node the guard
refuses; the runtime jobs repeat the verdict `envbuild verify` prints (the guard ran at the smoke
program's own start), so the image runs once.

For training jobs, beside the verify scripts:
- `build-sif-<target>.sh`: `apptainer build` of the promoted image by digest, from the envbuild.def
  `envbuild render --apptainer` writes (apptainer.definition, embedded in the script), then the guard
  and the definition's %test on the node, and only then the SIF under `<shared>/sif/`;
- `README.md`: the run recipe for Apptainer (`apptainer exec --nv`) and pyxis (`srun
  --container-image`), each starting with the guard on every node of the job.
"""

from __future__ import annotations

import os
import re

from envbuild import __version__
from envbuild._util.templates import environment
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.plan.plan import build_plan
from envbuild.preflight import GUARD_COMMAND, PREFIX, REFUSED, STOP_STATUS, smoke_environment
from envbuild.render.apptainer import definition
from envbuild.resolve.precision import target_precision
from envbuild.runtime import RUNTIMES
from envbuild.runtime.enroot import enroot_image
from envbuild.scaleout.bake import bake_target_name
from envbuild.scaleout.ciplan import ci_plan
from envbuild.scaleout.generated import emit
from envbuild.scaleout.quoting import comment_text, shell_word
from envbuild.smoke import smoke_command
from envbuild.spec.model import Spec

TEMPLATES = {
    "verify": "ci/slurm/verify.sh.j2",
    "promote": "ci/slurm/promote.sh.j2",
    "submit": "ci/slurm/submit.sh.j2",
    "pyxis": "ci/slurm/verify-pyxis.sh.j2",
    "sif": "ci/slurm/build-sif.sh.j2",
    "readme": "ci/slurm/README.md.j2",
}
README = "README.md"
SIF_NAME = "sif"  # <shared>/sif: the SIF files build-sif-<target>.sh writes, and their logs
DEF_DELIMITER = "END_OF_ENVBUILD_DEF"  # the here-document that holds envbuild.def in build-sif-<target>.sh
COMMAND = "ci slurm"
DEFAULT_RUNTIME = "apptainer"
DEFAULT_GRES = "gpu:1"
DEFAULT_TIME = "01:00:00"
ANY_PARTITION = "any"  # the directory name of a job sent to the cluster's default partition
PYXIS_SUFFIX = ".pyxis"  # verify-<target>-<partition>.pyxis.sh: the srun --container-image variant
SHARED_NAME = "shared"  # default shared directory: <-o DIR>/shared
DIGEST_PATTERN = "^[^@]+@sha256:[0-9a-f]{64}$"

# What sbatch reads from an #SBATCH line as one value: no spaces, quotes, `$`, `;` or line breaks.
_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_TIME_RE = re.compile(r"(?:[0-9]+-)?[0-9]+(?::[0-5][0-9]){0,2}")
_GRES_RE = re.compile(r"gpu(?::[A-Za-z0-9_][A-Za-z0-9_.-]*)?:[1-9][0-9]*")
_DIR_RE = re.compile(r"/[A-Za-z0-9_./+-]*")


class SlurmJob:
    """One verify job: the target it verifies, the partition it runs in (None: the default one)."""

    __slots__ = ("target", "key", "partition", "stem", "script", "pyxis_script", "directory")

    def __init__(self, target: str, partition: str | None, shared: str) -> None:
        self.target = target
        self.key = bake_target_name(target)
        self.partition = partition
        place = partition or ANY_PARTITION
        self.stem = f"verify-{self.key}-{place}"
        self.script = f"{self.stem}.sh"
        self.pyxis_script = f"{self.stem}{PYXIS_SUFFIX}.sh"
        self.directory = f"{shared}/{self.key}/{place}"


def check_value(flag: str, value: str, pattern: re.Pattern[str], accepted: str, fix: str) -> str:
    """`value` of `flag` when it matches `pattern` whole, else UsageError naming the flag."""
    if not pattern.fullmatch(value):
        raise UsageError(f"{flag} {value!r}: {accepted}", fix=fix)
    return value


def check_shared_dir(path: str, flag: str) -> str:
    """An absolute directory every node sees, as plain characters sbatch and the shell read as is."""
    if not os.path.isabs(path):
        raise UsageError(
            f"{flag} {path!r}: must be an absolute path (batch jobs start in another directory)",
            fix=f"pass {flag} /shared/envbuild or another absolute path on a filesystem every node mounts",
        )
    normal = os.path.normpath(path)
    return check_value(
        flag,
        normal,
        _DIR_RE,
        "may hold only letters, digits and _ . / + - (it goes into #SBATCH lines, which no shell reads)",
        f"pass {flag} with a plain path such as /shared/envbuild",
    )


def slurm_scripts(
    matrix: Matrix,
    spec: Spec,
    *,
    shared_dir: str,
    runtime: str = DEFAULT_RUNTIME,
    partitions: list[str] | None = None,
    gres: str | None = None,
    time: str = DEFAULT_TIME,
    account: str | None = None,
    spec_path: str = "envbuild.toml",
) -> dict[str, str]:
    """File name -> text of every file `envbuild ci slurm` writes (verify-*.sh, promote.sh, submit.sh,
    build-sif-*.sh, README.md). shared_dir: absolute, seen by every node; the reports, records, logs
    and SIF files go there."""
    if runtime not in RUNTIMES:
        raise UsageError(f"--runtime {runtime!r}: not one of {', '.join(RUNTIMES)}", fix="pick one of them")
    shared = check_shared_dir(shared_dir, "--shared-dir")
    names = "may hold only letters, digits, _ . and - (it goes into an #SBATCH line)"
    for partition in partitions or []:
        check_value("--partition", partition, _NAME_RE, names, "pass the partition's name as sinfo shows it")
    if len(set(partitions or [])) != len(partitions or []):
        raise UsageError(f"--partition {partitions}: a partition is named twice", fix="name each once")
    if account is not None:
        check_value("--account", account, _NAME_RE, names, "pass the account's name as sacctmgr shows it")
    check_value(
        "--time",
        time,
        _TIME_RE,
        "Slurm's time limit: MM, MM:SS, HH:MM:SS or D-HH:MM:SS",
        "pass e.g. --time 00:30:00",
    )
    if spec.smoke.device == "gpu":
        gres = check_value(
            "--gres", gres or DEFAULT_GRES, _GRES_RE, "must be gpu:N or gpu:TYPE:N", "pass e.g. --gres gpu:1"
        )
    elif gres is not None:
        raise UsageError(
            f'--gres {gres!r}: {spec.path} runs its smoke step on the CPU ([smoke] device = "cpu"), so its '
            "verify jobs ask for no GPU",
            fix='drop --gres, or set [smoke] device = "gpu" in the spec',
        )
    # install: unused here (the cluster has envbuild, the ENVBUILD command), but ci_plan checks one
    plan = ci_plan(matrix, spec, spec_path=spec_path, install="envbuild")
    several = [b.target for b in plan.builds if b.key != b.target]
    if several:
        raise UsageError(
            f"{spec.path}: target {several[0]!r} is built for several platforms; `envbuild {COMMAND}` "
            "verifies one platform's image per target",
            fix="give the target one platform for the cluster's machines, or verify each platform with "
            "`envbuild verify` on a node of that platform",
        )
    jobs = [
        SlurmJob(target, partition, shared) for target in plan.targets for partition in partitions or [None]
    ]
    first = {job.target: job for job in reversed(jobs)}  # each target's job in the first partition
    if len({job.key for job in first.values()}) != len(first):
        raise UsageError(
            f"{spec.path}: two targets get the same script name once characters other than letters, "
            "digits, _ and - become `-`",
            fix="rename one of the [[target]]s",
        )
    sbatch = {"time": time, "account": account, "gres": gres if spec.smoke.device == "gpu" else None}
    common = {
        "version": __version__,
        "spec_path": spec_path,
        "repository": plan.staging,
        "digest_pattern": DIGEST_PATTERN,
        "shared": shared,
        "sbatch": sbatch,
        # the image's preflight guard: what runs it, its stop status, and the lines that carry its verdict
        "guard_command": GUARD_COMMAND,
        "stop_status": STOP_STATUS,
        "guard_prefix": PREFIX,
        "refused": REFUSED,
        "preflight_env": sorted(smoke_environment(spec.smoke.device, None).items()),
    }
    env = environment({"sh": shell_word, "comment": comment_text})
    files: dict[str, str] = {}
    pyxis = runtime == "enroot"  # pyxis runs containers through Enroot: the same image, srun's own way
    # the precision each target's job passes: one every GPU of the target has (a partition's node may
    # hold any of them), as resolve and render warn (resolve.precision)
    precisions = {t.name: target_precision(matrix, spec.smoke, t.stack.gpus) for t in spec.targets}
    for job in jobs:
        precision = precisions[job.target]
        files[job.script] = env.get_template(TEMPLATES["verify"]).render(
            common | {"job": job, "runtime": runtime, "smoke": plan.smoke, "precision": precision}
        )
        if pyxis:
            files[job.pyxis_script] = env.get_template(TEMPLATES["pyxis"]).render(
                common
                | {
                    "job": job,
                    "smoke": plan.smoke,
                    "smoke_command": smoke_command(plan.smoke.device, plan.smoke.steps, precision),
                    "enroot_image": enroot_image(plan.staging),
                }
            )
    # every verify job must pass before promote runs (afterok), so any one report stands for all
    promotions = [{"target": name, "tags": tags, "job": first[name]} for name, tags in plan.promotions]
    files["promote.sh"] = env.get_template(TEMPLATES["promote"]).render(
        common | {"promotions": promotions, "targets": plan.targets}
    )
    sif_jobs = [sif_job(matrix, spec, name, shared, (partitions or [None])[0]) for name in plan.targets]
    for job in sif_jobs:
        files[job["script"]] = env.get_template(TEMPLATES["sif"]).render(
            common | job | {"gpu": spec.smoke.device == "gpu", "delimiter": DEF_DELIMITER}
        )
    files[README] = env.get_template(TEMPLATES["readme"]).render(common | {"targets": sif_jobs})
    files["submit.sh"] = env.get_template(TEMPLATES["submit"]).render(
        common
        | {
            "jobs": jobs,
            "targets": [(name, bake_target_name(name)) for name in plan.targets],
            "pyxis": pyxis,
            "pyxis_suffix": PYXIS_SUFFIX,
        }
    )
    return files


def sif_job(matrix: Matrix, spec: Spec, target: str, shared: str, partition: str | None) -> dict[str, object]:
    """The values of one target's build-sif script and README section. The SIF job runs in the first
    --partition (sbatch -p on its command line overrides it): its smoke step needs a GPU node of the
    kind verify ran on, and one SIF serves every partition of the same platform. The definition is
    render's own (apptainer.definition), so the SIF is the one `envbuild render --apptainer` describes."""
    spec_target = spec.target(target)[0]
    plan = build_plan(matrix, spec, spec_target)  # one platform per target: slurm_scripts refused more
    text = definition(plan, spec, target)
    if DEF_DELIMITER in text.splitlines():  # cannot happen (its lines are keywords, labels, comments)
        raise UsageError(
            f"{spec.path} target {target!r}: its envbuild.def has a line {DEF_DELIMITER!r}, which would end "
            "the here-document that holds it in the SIF job",
            fix="change the spec value that writes that line (an [image] label)",
        )
    key = bake_target_name(target)
    return {
        "target": target,
        "key": key,
        "script": f"build-sif-{key}.sh",
        "partition": partition,
        "sif_dir": f"{shared}/{SIF_NAME}",
        "definition": text,
        "enroot_image": enroot_image(spec.image.repository),
    }


def write_scripts(
    matrix: Matrix,
    spec: Spec,
    out_dir: str,
    *,
    shared_dir: str | None = None,
    **options: object,
) -> list[str]:
    """`envbuild ci slurm`: the scripts under `out_dir` (created), executable; their paths. The shared
    directory defaults to <out_dir>/shared, made absolute."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(
            f"-o {out_dir}: exists and is not a directory", fix="give -o a new or existing directory"
        )
    shared = shared_dir if shared_dir is not None else os.path.join(os.path.abspath(out_dir), SHARED_NAME)
    flag = "--shared-dir" if shared_dir is not None else "-o (the default --shared-dir is <-o>/shared)"
    if shared_dir is None:
        check_shared_dir(shared, flag)
    files = slurm_scripts(matrix, spec, shared_dir=shared, **options)  # type: ignore[arg-type]
    written = []
    for name, text in files.items():
        path = os.path.join(out_dir, name)
        emit(path, text, executable=name.endswith(".sh"))  # not README.md
        written.append(path)
    return written
