"""Charliecloud: unprivileged containers from a directory image, no daemon (ch-run, ch-image, ch-convert).

Getting the image by digest:
- from an HTTPS registry: `ch-image pull REPO@sha256:...` into a storage directory inside the run's
  scratch directory, then `ch-convert -i ch-image` to a plain directory;
- from a plain-HTTP (loopback) registry, which ch-image does not speak, or an image the local Docker
  Engine holds: `docker pull` by digest, then what `ch-convert -i docker` does, less its gzip: the
  container filesystem exported to a plain tarball, the image's ENV added to it as /ch/environment
  (the driver writes it from the image's config), and `ch-convert -i tar` to unpack it. ch-convert's
  docker input compresses the export and unpacks it again (its own "FIXME: needlessly compresses"):
  for a 1.2 GB torch image, about 35 s of a core for pigz and 14 s for gunzip, per verify.

Running: `ch-run --unset-env='*' --set-env` starts from the image's environment alone (nothing of the
host's leaks in), `--set-env=FILE` adds the smoke step's variables, `--uid/--gid` become the image's
USER, `--private-tmp` gives it a /tmp of its own, and the image directory stays read-only. For the GPU,
`ch-fromhost --nvidia` first copies the host's NVIDIA libraries into the unpacked image (it is ours
to change: a throw-away copy).

What it cannot do: Charliecloud has no network namespace, so the smoke step shares the host's network.
"""

from __future__ import annotations

import getpass
import os
import re

from envbuild.oci.reference import parse_reference
from envbuild.oci.registry import registry_scheme
from envbuild.runtime.base import IMAGE_ENV_FILE, SMOKE_ENV_FILE, ContainerRuntime, SmokeRun, Step, step

IMAGE_DIR = "image"  # run.path() of the unpacked image
STORAGE_DIR = "ch-storage"  # run.path() of ch-image's storage, removed with the scratch directory
EXPORT_TAR = "image.tar"  # run.path() of the exported filesystem, removed once unpacked
ENVIRONMENT = "ch/environment"  # where ch-run --set-env (no argument) reads the image's ENV
EXPORT_ROLE = "io.envbuild.role=charliecloud-export"  # the label of the container made to export


def export_container(run: SmokeRun) -> str:
    """The name of the container created only to export the image's filesystem: one per run (the
    scratch directory's unique name), so cleanup removes exactly it."""
    unique = re.sub(r"[^a-zA-Z0-9_.-]", "-", os.path.basename(os.path.normpath(run.workdir)))
    return f"envbuild-ch-{unique}"


def _tool_env() -> dict[str, str]:
    # ch-image and ch-convert refuse to run without $USER, which batch jobs and containers often lack
    return {"USER": getpass.getuser()}


def through_docker(run: SmokeRun) -> bool:
    """Whether the image comes through the local Docker Engine: a name it holds, or a digest on a
    plain-HTTP registry (ch-image speaks only HTTPS)."""
    if run.local:
        return True
    return registry_scheme(parse_reference(run.image).api_host) == "http"


class Charliecloud(ContainerRuntime):
    name = "charliecloud"
    binary = "ch-run"
    install_fix = (
        "install Charliecloud (Debian/Ubuntu: apt-get install charliecloud-runtime charliecloud-builders; "
        "or `module load charliecloud` on a cluster), or pick another --runtime"
    )
    limits = ("no network isolation: Charliecloud has no network namespace",)
    version_argv = ("ch-run", "--version")  # "0.31", on stderr
    wants_image_env = True  # the Docker path adds it to the export as /ch/environment

    def version_step(self) -> Step:
        return step("print its version", *self.version_argv, env=_tool_env())  # ch-run wants $USER too

    def fetch(self, run: SmokeRun) -> list[Step]:
        image_dir = run.path(IMAGE_DIR)
        env = _tool_env()
        if through_docker(run):
            steps = (
                []
                if run.local
                else [step("pull the image with Docker", "docker", "pull", "--quiet", run.image)]
            )
            steps += self._export_through_docker(run)
        else:
            storage = run.path(STORAGE_DIR)
            steps = [
                step("pull the image", "ch-image", "--storage", storage, "pull", run.image, env=env),
                step(
                    "unpack the image",
                    "ch-convert",
                    "-s",
                    storage,
                    "-i",
                    "ch-image",
                    "-o",
                    "dir",
                    run.image,
                    image_dir,
                    env=env,
                ),
            ]
        if run.device == "gpu":
            steps.append(
                step("inject the host's NVIDIA libraries", "ch-fromhost", "--nvidia", image_dir, env=env)
            )
        return steps

    def _export_through_docker(self, run: SmokeRun) -> list[Step]:
        """The image Docker holds, as a plain directory with /ch/environment: ch-convert -i docker's
        steps (create, export, add the environment, unpack) without compressing in between."""
        container, tarball = export_container(run), run.path(EXPORT_TAR)
        # create runs nothing; /bin/true is the command an image without CMD or ENTRYPOINT needs
        create = ("docker", "create", "--read-only", "--label", EXPORT_ROLE, "--name", container)
        # the member is named relative to the scratch directory: no path of the user's in the pattern
        rename = f"--transform=s,^{re.escape(IMAGE_ENV_FILE)}$,{ENVIRONMENT},"
        append = ("tar", "--append", "-f", tarball, "-C", run.workdir, rename, IMAGE_ENV_FILE)
        unpack = ("ch-convert", "-i", "tar", "-o", "dir", tarball, run.path(IMAGE_DIR))
        return [
            step("create a container to export", *create, run.image, "/bin/true"),
            step("export the image's filesystem", "docker", "export", "--output", tarball, container),
            step("remove the export container", "docker", "rm", container),
            step("add the image's environment", *append),
            step("unpack the image", *unpack, env=_tool_env()),
            step("remove the exported tarball", "rm", "-f", tarball),
        ]

    def cleanup(self, run: SmokeRun) -> list[Step]:
        """The export container, should a step after its creation have failed or been interrupted."""
        if not through_docker(run):
            return []
        return [step("remove the export container", "docker", "rm", "--force", export_container(run))]

    def execute(self, run: SmokeRun) -> Step:
        argv = ["ch-run", "--unset-env=*", "--set-env", f"--set-env={run.path(SMOKE_ENV_FILE)}"]
        if run.user:
            uid, gid = run.user.split(":")
            argv += ["--uid", uid, "--gid", gid]
        argv += ["--private-tmp", "--cd", "/tmp", run.path(IMAGE_DIR), "--", *run.argv]
        return step("run the smoke step", *argv, env=_tool_env())


RUNTIME = Charliecloud()
