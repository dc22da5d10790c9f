"""Enroot: NVIDIA's unprivileged runtime behind Slurm's pyxis plugin (`srun --container-image`).

Getting the image by digest (https://github.com/NVIDIA/enroot/blob/master/doc/cmd/import.md,
create.md): `enroot import --output IMAGE.sqsh docker://REGISTRY#REPO@sha256:...` writes one squashfs
file into the run's scratch directory, then `enroot create --name NAME` unpacks it. The `@sha256:`
form is Enroot 4.0's (src/docker.sh, "docker://[USER@]REGISTRY#IMAGE@DIGEST"); Enroot 3 takes tags
only, so `verify --runtime enroot` needs Enroot >= 4.0. `#` separates the registry explicitly, so no
guessing whether the first path part is a host. A plain-HTTP (loopback) registry needs
ENROOT_ALLOW_HTTP. An image the local Docker Engine holds comes through `dockerd://NAME`.

Every step runs with ENROOT_DATA_PATH, ENROOT_CACHE_PATH, ENROOT_RUNTIME_PATH and ENROOT_TEMP_PATH
inside the scratch directory (doc/configuration.md), so the layer cache and the unpacked root
filesystem of one run never mix with the user's own containers, and `enroot remove --force NAME`
(doc/cmd/remove.md) deletes the unpacked tree, whose read-only directories a plain delete cannot.
ENROOT_CONFIG_PATH stays the user's: registry credentials live there.

Running (doc/cmd/start.md, doc/standard-hooks.md): `enroot start --env KEY=VALUE ... NAME COMMAND`;
the root filesystem is read-only and /tmp a tmpfs (conf/mounts/10-system.fstab). The GPU comes from
the NVIDIA hook (98-nvidia.sh), driven by NVIDIA_VISIBLE_DEVICES: "all" (a value Slurm or pyxis set in
the job's environment wins) with the compute capability for the GPU run, "void" (the hook does
nothing) for the CPU run; the CPU run sets it in the step's own environment too, because the hook
prefers the host's value. The command goes through the image's /etc/rc, so an image ENTRYPOINT wraps
it, as it does under Docker.

What it cannot do: run as the image's USER (Enroot runs as the calling user, or as root with --root),
and isolate the network (`enroot start --net` is not in a released Enroot yet).
"""

from __future__ import annotations

import os

from envbuild.oci.reference import parse_reference
from envbuild.oci.registry import registry_scheme
from envbuild.runtime.base import ContainerRuntime, SmokeRun, Step, step

SQUASHFS = "image.sqsh"  # run.path() of the imported image
# run.path() of each Enroot directory: its layer cache, unpacked containers, runtime state and temp
PATHS = {
    "ENROOT_CACHE_PATH": "enroot-cache",
    "ENROOT_DATA_PATH": "enroot-data",
    "ENROOT_RUNTIME_PATH": "enroot-runtime",
}


def container_name(run: SmokeRun) -> str:
    """The unpacked container's name: the scratch directory's, unique per run."""
    return os.path.basename(run.workdir.rstrip("/"))


def source_uri(run: SmokeRun) -> str:
    """Where `enroot import` gets the image: the local Docker Engine, or the registry by digest."""
    if run.local:
        return f"dockerd://{run.image}"
    ref = parse_reference(run.image)
    return f"docker://{enroot_image(ref.name)}@{ref.digest}"


def enroot_image(repository: str) -> str:
    """REGISTRY#REPO: how Enroot (and pyxis's --container-image) names a repository, the registry
    separated explicitly so no one guesses whether the first path part is a host."""
    ref = parse_reference(repository)
    return f"{ref.api_host}#{ref.repository}"


def tool_env(run: SmokeRun) -> dict[str, str]:
    env = {key: run.path(name) for key, name in PATHS.items()}
    env["ENROOT_TEMP_PATH"] = run.workdir
    return env


class Enroot(ContainerRuntime):
    name = "enroot"
    binary = "enroot"
    install_fix = (
        "install Enroot >= 4.0 (https://github.com/NVIDIA/enroot/blob/master/doc/installation.md; "
        "on a cluster it comes with pyxis), or pick another --runtime"
    )
    limits = (
        "runs as the calling user, not the image's USER: Enroot maps only the caller (or root)",
        "no network isolation: released Enroot versions have no network namespace",
    )
    version_argv = ("enroot", "version")  # "4.0.1"
    min_version = (4, 0)
    min_version_why = "`enroot import docker://REGISTRY#REPO@sha256:...` (by digest) is Enroot 4.0's"

    def fetch(self, run: SmokeRun) -> list[Step]:
        env = tool_env(run)
        import_env = dict(env)
        if not run.local and registry_scheme(parse_reference(run.image).api_host) == "http":
            import_env["ENROOT_ALLOW_HTTP"] = "yes"
        squashfs = run.path(SQUASHFS)
        return [
            step("pull the image", "enroot", "import", "--output", squashfs, source_uri(run), env=import_env),
            step("unpack the image", "enroot", "create", "--name", container_name(run), squashfs, env=env),
        ]

    def execute(self, run: SmokeRun) -> Step:
        env = tool_env(run)
        argv = ["enroot", "start"]
        for key, value in sorted(run.env.items()):
            argv += ["--env", f"{key}={value}"]
        if run.device == "gpu":
            argv += ["--env", "NVIDIA_VISIBLE_DEVICES=all"]
            argv += ["--env", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]
        else:
            argv += ["--env", "NVIDIA_VISIBLE_DEVICES=void"]
            env["NVIDIA_VISIBLE_DEVICES"] = "void"
        argv += [container_name(run), *run.argv]
        return step("run the smoke step", *argv, env=env)

    def cleanup(self, run: SmokeRun) -> list[Step]:
        name = container_name(run)
        return [step("remove the container", "enroot", "remove", "--force", name, env=tool_env(run))]


RUNTIME = Enroot()
