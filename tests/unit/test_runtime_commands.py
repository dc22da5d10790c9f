"""The exact command lines of every command-line runtime (runtime.base): Apptainer, Enroot and
Charliecloud, CPU and GPU, plain-HTTP and HTTPS registries, with and without the image's USER.

Whole argv tuples are compared: a flag that moves, disappears or appears fails here, without the
binaries installed. What each flag means is cited in the runtime's module docstring."""

from __future__ import annotations

import getpass

import pytest

from envbuild.runtime import runtime_named
from envbuild.runtime.base import SmokeRun
from envbuild.smoke import smoke_command

DIGEST = "sha256:" + "ab" * 32
LOOPBACK = f"127.0.0.1:5000/envbuild-test/torch@{DIGEST}"  # plain HTTP: loopback
REMOTE = f"registry.example.com/team/torch@{DIGEST}"  # HTTPS
WORK = "/scratch/envbuild-verify-abc123"
SMOKE = ("python", "/opt/envbuild/smoke.py")


def run_of(image: str = LOOPBACK, device: str = "cpu", user: str | None = None, **extra) -> SmokeRun:
    fields = {
        "image": image,
        "image_id": "sha256:" + "cd" * 32,
        "platform": "linux/amd64",
        "device": device,
        "argv": smoke_command(device, 3, "fp32"),
        "env": {"ENVBUILD_SMOKE_LR": "0.1"},
        "user": user,
        "workdir": WORK,
        "local": False,
        "image_env": ("PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"),
    }
    return SmokeRun(**(fields | extra))


def cmd(device: str) -> tuple[str, ...]:
    return (*SMOKE, "--device", device, "--steps", "3", "--precision", "fp32")


# --- Apptainer --------------------------------------------------------------------------------------

APPTAINER_ENV = {"APPTAINER_TMPDIR": WORK, "APPTAINER_CACHEDIR": f"{WORK}/apptainer-cache"}


def test_apptainer_pulls_by_digest_from_a_plain_http_registry_into_the_workdir() -> None:
    (pull,) = runtime_named("apptainer").fetch(run_of())
    assert pull.argv == (
        "apptainer", "pull", "--disable-cache", "--no-https", f"{WORK}/image.sif", f"docker://{LOOPBACK}",
    )  # fmt: skip
    assert pull.env == APPTAINER_ENV


def test_apptainer_pulls_over_https_without_no_https() -> None:
    (pull,) = runtime_named("apptainer").fetch(run_of(REMOTE))
    assert pull.argv == ("apptainer", "pull", "--disable-cache", f"{WORK}/image.sif", f"docker://{REMOTE}")


def test_apptainer_takes_a_local_docker_image_from_the_daemon() -> None:
    (pull,) = runtime_named("apptainer").fetch(run_of("envbuild/demo:dev", local=True))
    assert pull.argv == (
        "apptainer",
        "pull",
        "--disable-cache",
        f"{WORK}/image.sif",
        "docker-daemon:envbuild/demo:dev",
    )


def test_apptainer_cpu_run_is_contained_without_network_or_gpu() -> None:
    step = runtime_named("apptainer").execute(run_of(user="1000:1000"))
    assert step.argv == (
        "apptainer", "exec", "--containall", "--cleanenv", "--env-file", f"{WORK}/smoke.env",
        "--net", "--network", "none", "--pwd", "/tmp", f"{WORK}/image.sif", *cmd("cpu"),
    )  # fmt: skip
    assert step.env == APPTAINER_ENV


def test_apptainer_gpu_run_adds_nv_only() -> None:
    step = runtime_named("apptainer").execute(run_of(device="gpu"))
    assert step.argv == (
        "apptainer", "exec", "--containall", "--cleanenv", "--env-file", f"{WORK}/smoke.env", "--nv",
        "--net", "--network", "none", "--pwd", "/tmp", f"{WORK}/image.sif", *cmd("gpu"),
    )  # fmt: skip


def test_apptainer_cleans_up_nothing_outside_the_workdir() -> None:
    assert runtime_named("apptainer").cleanup(run_of()) == []


def test_apptainer_env_file_quotes_values_it_reads_as_shell() -> None:
    text = runtime_named("apptainer").env_file({"B": "two words $HOME", "A": "plain"})
    assert text == "A=plain\nB='two words $HOME'\n"


def test_apptainer_env_file_refuses_a_newline() -> None:
    with pytest.raises(ValueError, match="cannot go in an environment file"):
        runtime_named("apptainer").env_file({"A": "x\nB=y"})


# --- Enroot -----------------------------------------------------------------------------------------

ENROOT_ENV = {
    "ENROOT_CACHE_PATH": f"{WORK}/enroot-cache",
    "ENROOT_DATA_PATH": f"{WORK}/enroot-data",
    "ENROOT_RUNTIME_PATH": f"{WORK}/enroot-runtime",
    "ENROOT_TEMP_PATH": WORK,
}
NAME = "envbuild-verify-abc123"


def test_enroot_imports_by_digest_with_http_allowed_for_a_loopback_registry() -> None:
    imported, created = runtime_named("enroot").fetch(run_of())
    assert imported.argv == (
        "enroot", "import", "--output", f"{WORK}/image.sqsh",
        f"docker://127.0.0.1:5000#envbuild-test/torch@{DIGEST}",
    )  # fmt: skip
    assert imported.env == ENROOT_ENV | {"ENROOT_ALLOW_HTTP": "yes"}
    assert created.argv == ("enroot", "create", "--name", NAME, f"{WORK}/image.sqsh")
    assert created.env == ENROOT_ENV


def test_enroot_imports_over_https_without_allow_http() -> None:
    imported, _ = runtime_named("enroot").fetch(run_of(REMOTE))
    assert imported.argv[-1] == f"docker://registry.example.com#team/torch@{DIGEST}"
    assert imported.env == ENROOT_ENV


def test_enroot_takes_a_local_docker_image_from_the_daemon() -> None:
    imported, _ = runtime_named("enroot").fetch(run_of("envbuild/demo:dev", local=True))
    assert imported.argv == (
        "enroot",
        "import",
        "--output",
        f"{WORK}/image.sqsh",
        "dockerd://envbuild/demo:dev",
    )


def test_enroot_cpu_run_voids_the_nvidia_hook_in_both_environments() -> None:
    step = runtime_named("enroot").execute(run_of(user="1000:1000"))
    assert step.argv == (
        "enroot", "start", "--env", "ENVBUILD_SMOKE_LR=0.1", "--env", "NVIDIA_VISIBLE_DEVICES=void",
        NAME, *cmd("cpu"),
    )  # fmt: skip
    assert step.env == ENROOT_ENV | {"NVIDIA_VISIBLE_DEVICES": "void"}


def test_enroot_gpu_run_asks_the_nvidia_hook_for_every_gpu() -> None:
    step = runtime_named("enroot").execute(run_of(device="gpu"))
    assert step.argv == (
        "enroot", "start", "--env", "ENVBUILD_SMOKE_LR=0.1", "--env", "NVIDIA_VISIBLE_DEVICES=all",
        "--env", "NVIDIA_DRIVER_CAPABILITIES=compute,utility", NAME, *cmd("gpu"),
    )  # fmt: skip
    assert step.env == ENROOT_ENV  # a value Slurm or pyxis set on the host wins in the hook


def test_enroot_removes_its_container_with_the_same_data_path() -> None:
    (remove,) = runtime_named("enroot").cleanup(run_of())
    assert remove.argv == ("enroot", "remove", "--force", NAME)
    assert remove.env == ENROOT_ENV


# --- Charliecloud -----------------------------------------------------------------------------------


@pytest.fixture
def user_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("USER", getpass.getuser())
    return {"USER": getpass.getuser()}


CONTAINER = "envbuild-ch-envbuild-verify-abc123"  # the scratch directory's name: one per run


def exported_through_docker(image: str) -> list[tuple[str, ...]]:
    """ch-convert -i docker's steps without its gzip: create, export, environment, ch-convert -i tar."""
    return [
        ("docker", "create", "--read-only", "--label", "io.envbuild.role=charliecloud-export",
         "--name", CONTAINER, image, "/bin/true"),
        ("docker", "export", "--output", f"{WORK}/image.tar", CONTAINER),
        ("docker", "rm", CONTAINER),
        ("tar", "--append", "-f", f"{WORK}/image.tar", "-C", WORK,
         "--transform=s,^image\\.env$,ch/environment,", "image.env"),
        ("ch-convert", "-i", "tar", "-o", "dir", f"{WORK}/image.tar", f"{WORK}/image"),
        ("rm", "-f", f"{WORK}/image.tar"),
    ]  # fmt: skip


def test_charliecloud_gets_a_plain_http_image_through_docker(user_env: dict[str, str]) -> None:
    pulled, *exported = runtime_named("charliecloud").fetch(run_of())
    assert pulled.argv == ("docker", "pull", "--quiet", LOOPBACK)
    assert pulled.env is None
    assert [s.argv for s in exported] == exported_through_docker(LOOPBACK)
    assert [s.env for s in exported] == [None, None, None, None, user_env, None]  # ch-convert wants $USER


def test_charliecloud_removes_the_export_container_whatever_failed() -> None:
    (removed,) = runtime_named("charliecloud").cleanup(run_of())
    assert removed.argv == ("docker", "rm", "--force", CONTAINER)
    assert runtime_named("charliecloud").cleanup(run_of(REMOTE)) == []  # ch-image made no container


def test_charliecloud_export_container_is_named_after_the_scratch_directory_alone() -> None:
    odd = run_of(workdir="/scratch/a dir;$(x)/envbuild-verify-q_1")  # ENVBUILD_RUNTIME_DIR is the user's
    (create, *_rest) = runtime_named("charliecloud").fetch(odd)[1:]
    assert create.argv[create.argv.index("--name") + 1] == "envbuild-ch-envbuild-verify-q_1"


def test_charliecloud_pulls_https_with_ch_image_into_the_workdir(user_env: dict[str, str]) -> None:
    pulled, converted = runtime_named("charliecloud").fetch(run_of(REMOTE))
    storage = f"{WORK}/ch-storage"
    assert pulled.argv == ("ch-image", "--storage", storage, "pull", REMOTE)
    assert converted.argv == (
        "ch-convert", "-s", storage, "-i", "ch-image", "-o", "dir", REMOTE, f"{WORK}/image",
    )  # fmt: skip
    assert pulled.env == converted.env == user_env


def test_charliecloud_converts_a_local_docker_image_without_pulling() -> None:
    steps = runtime_named("charliecloud").fetch(run_of("envbuild/demo:dev", local=True))
    assert [s.argv for s in steps] == exported_through_docker("envbuild/demo:dev")


def test_charliecloud_gpu_fetch_injects_the_host_nvidia_libraries() -> None:
    steps = runtime_named("charliecloud").fetch(run_of(device="gpu"))
    assert [s.argv for s in steps][-1] == ("ch-fromhost", "--nvidia", f"{WORK}/image")
    assert len(steps) == 8  # the pull, the six of the export, then ch-fromhost


def test_charliecloud_runs_as_the_image_user_from_the_smoke_env_file() -> None:
    step = runtime_named("charliecloud").execute(run_of(user="10001:20002"))
    assert step.argv == (
        "ch-run", "--unset-env=*", "--set-env", f"--set-env={WORK}/smoke.env", "--uid", "10001",
        "--gid", "20002", "--private-tmp", "--cd", "/tmp", f"{WORK}/image", "--", *cmd("cpu"),
    )  # fmt: skip


def test_charliecloud_without_a_numeric_user_runs_as_the_caller_on_the_gpu() -> None:
    step = runtime_named("charliecloud").execute(run_of(device="gpu"))
    assert step.argv == (
        "ch-run", "--unset-env=*", "--set-env", f"--set-env={WORK}/smoke.env", "--private-tmp",
        "--cd", "/tmp", f"{WORK}/image", "--", *cmd("gpu"),
    )  # fmt: skip


def test_charliecloud_env_file_is_literal_key_value_lines() -> None:
    assert (
        runtime_named("charliecloud").env_file({"B": "two words $HOME", "A": "x"})
        == "A=x\nB=two words $HOME\n"
    )


@pytest.mark.parametrize("name", ["apptainer", "enroot", "charliecloud"])
def test_every_runtime_says_what_it_cannot_do_and_how_to_install_it(name: str) -> None:
    runtime = runtime_named(name)
    assert runtime.name == name
    assert runtime.limits and all(isinstance(item, str) and item for item in runtime.limits)
    assert "--runtime" in runtime.install_fix
