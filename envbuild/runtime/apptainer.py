"""Apptainer (formerly Singularity): the container runtime most Slurm clusters ship, no daemon.

Getting the image by digest (https://apptainer.org/docs/user/main/cli/apptainer_pull.html):
`apptainer pull --disable-cache [--no-https] IMAGE.sif docker://REPO@sha256:...` builds one SIF file
inside the run's scratch directory. --disable-cache keeps the layer blobs out of the user's
~/.apptainer/cache, and APPTAINER_TMPDIR points the unpacking at the scratch directory, so nothing
outlives the run but what the driver deletes. --no-https is for a plain-HTTP (loopback) registry. An
image the local Docker Engine holds comes through `docker-daemon:NAME`.

Running (https://apptainer.org/docs/user/main/cli/apptainer_exec.html,
https://apptainer.org/docs/user/main/environment_and_metadata.html):
`apptainer exec --containall --cleanenv --env-file FILE` starts from the image's environment alone
(no $HOME, /tmp or host variables leak in: --containall also gives PID and IPC namespaces), the file
adds the smoke step's variables (Apptainer reads it with shell syntax, hence `env_file` quotes every
value), `--nv` binds the host's NVIDIA driver libraries and devices for the GPU, and `--net --network
none` leaves the container only a loopback interface, as Docker's smoke run has
(https://apptainer.org/docs/user/main/networking.html: "none" is the one network type unprivileged
users may request, so this needs neither root nor --fakeroot). `apptainer exec` runs the command
itself, not the image's runscript.

What it cannot do: run as the image's USER (Apptainer always runs as the calling user).
"""

from __future__ import annotations

import shlex

from envbuild.oci.reference import parse_reference
from envbuild.oci.registry import registry_scheme
from envbuild.runtime.base import SMOKE_ENV_FILE, ContainerRuntime, SmokeRun, Step, step

SIF = "image.sif"  # run.path() of the pulled image
CACHE_DIR = "apptainer-cache"  # run.path() of Apptainer's cache, should anything ignore --disable-cache


def source_uri(run: SmokeRun) -> str:
    """Where `apptainer pull` gets the image: the local Docker Engine, or the registry by digest."""
    if run.local:
        return f"docker-daemon:{run.image}"
    return f"docker://{run.image}"


def tool_env(run: SmokeRun) -> dict[str, str]:
    """Apptainer's scratch space for the pull: the run's scratch directory, not $HOME or /tmp."""
    return {"APPTAINER_TMPDIR": run.workdir, "APPTAINER_CACHEDIR": run.path(CACHE_DIR)}


class Apptainer(ContainerRuntime):
    name = "apptainer"
    binary = "apptainer"
    install_fix = (
        "install Apptainer (https://apptainer.org/docs/admin/main/installation.html; "
        "or `module load apptainer` on a cluster), or pick another --runtime"
    )
    limits = ("runs as the calling user, not the image's USER: Apptainer does not switch users",)
    version_argv = ("apptainer", "--version")  # "apptainer version 1.3.4"

    def fetch(self, run: SmokeRun) -> list[Step]:
        argv = ["apptainer", "pull", "--disable-cache"]
        if not run.local and registry_scheme(parse_reference(run.image).api_host) == "http":
            argv.append("--no-https")
        argv += [run.path(SIF), source_uri(run)]
        return [step("pull the image", *argv, env=tool_env(run))]

    def execute(self, run: SmokeRun) -> Step:
        argv = ["apptainer", "exec", "--containall", "--cleanenv"]
        argv += ["--env-file", run.path(SMOKE_ENV_FILE)]
        if run.device == "gpu":
            argv.append("--nv")
        argv += ["--net", "--network", "none", "--pwd", "/tmp", run.path(SIF), *run.argv]
        return step("run the smoke step", *argv, env=tool_env(run))

    def env_file(self, env: dict[str, str]) -> str:
        """Apptainer evaluates --env-file as shell assignments: every value is quoted, so a `$` or a
        space in it stays literal."""
        super().env_file(env)  # the same refusals (newlines, "=" in names)
        return "".join(f"{key}={shlex.quote(value)}\n" for key, value in sorted(env.items()))


RUNTIME = Apptainer()
