"""`--engine podman`'s parts that need no podman (issue 37): `podman build` output read into the
build's error, the push digest Podman's compat API reports, its `docker save` archive layout, the
engine setting's layers, the GPU paths Podman has, and where its API is looked for.

The texts are podman 4.3.1's own (Debian bookworm): tests/fixtures/podman/build-failed.txt is
`podman build` of build-failed.Dockerfile there, and the push status and archive names below were
read from its compat API with the docker SDK (see tests/fixtures/podman/SOURCES.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.engine import engine_named, selected
from envbuild.engine.base import EngineError
from envbuild.engine.podman_engine import PodmanEngine, default_socket, rootless_of
from envbuild.errors import UsageError, VerifyError
from envbuild.image.builder import choose_backend, runs_mounts
from envbuild.image.filesystem import is_layer_name
from envbuild.image.podmanbuild import PodmanOutput
from envbuild.image.promote import pushed_digest
from envbuild.image.verify import engine_gpu_path
from envbuild.spec.model import parse_spec
from envbuild.stages.settings import build_settings, layered, rule_named

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPEC = {"stack": {"driver": "580", "framework": "torch==2.13.0", "python": "3.11", "os": "debian12"}}


def test_a_failed_podman_build_names_the_step_its_exit_status_and_what_it_printed() -> None:
    output = PodmanOutput()
    for line in (FIXTURES / "podman" / "build-failed.txt").read_text().splitlines():
        output.feed(line)
    error = output.failure(100, "/build/build.log")
    assert error.message.startswith(
        "podman build failed at step 3/3: RUN echo to-stdout; echo E: Unable to locate package nope >&2; "
        "exit 100 (exit code 100); the step's output says:"
    )
    assert error.message.endswith("\n    E: Unable to locate package nope")
    assert (
        "to-stdout" not in error.message.splitlines()[-1]
        and error.fix == "read the full log: /build/build.log"
    )
    assert output.steps == 5  # both stages' steps


def test_progress_names_the_stage_of_a_multi_stage_build() -> None:
    said: list[str] = []
    output = PodmanOutput(said.append)
    output.feed("[2/2] STEP 2/3: COPY --from=one /etc/hostname /x")
    output.feed("STEP 4/19: RUN apt-get update")
    assert said == ["step 2/3: [stage 2/2] COPY --from=one /etc/hostname /x", "step 4/19: RUN apt-get update"]


def test_a_build_that_stops_before_a_step_says_so() -> None:
    output = PodmanOutput()
    output.feed("Error: no context directory and no Containerfile specified")
    error = output.failure(125, "/b.log")
    assert error.message == (
        "podman build failed before the first step\n    no context directory and no Containerfile specified"
    )


def test_the_push_digest_comes_from_dockers_aux_chunk_or_podmans_status_line() -> None:
    digest = "sha256:" + "86990c20abc920a42b41cca04cfe3c7d47c1347c90f0b40c68ea2a70b50f4edd"
    assert pushed_digest({"status": f"t1: digest: {digest} size: 2314"}) == digest  # podman 4.3.1
    assert pushed_digest({"aux": {"Tag": "t1", "Digest": digest, "Size": 2314}}) == digest  # docker
    assert pushed_digest({"status": "The push refers to repository [127.0.0.1:5000/x:t1]"}) is None
    assert pushed_digest({"status": "t1: digest: sha256:abc size: 1"}) is None  # not a digest
    assert pushed_digest(["not", "a", "chunk"]) is None


def test_podmans_docker_archive_layers_are_read_and_its_links_and_config_are_not() -> None:
    # the members of podman 4.3.1's compat `images/get` archive of the bookworm base
    layer = "fca4e10cd6b9a88fb58d540e4980308dbbec6fb63c330dc0598eeb521a011ca7.tar"
    assert is_layer_name(layer)
    assert not is_layer_name("5709f26d9a2e2004dbaabccc76c76eb819b495219c6d95231643c22d016369ae.json")
    assert not is_layer_name("manifest.json") and not is_layer_name("repositories")
    assert not is_layer_name("nested/" + layer) and not is_layer_name("evil.tar")
    assert is_layer_name("42ea1987c3936d0850d82b37f392d1f2f0288e683879aaf1a5eb1b5de1cb1467/layer.tar")


def spec(extra: dict | None = None):
    return parse_spec({**SPEC, **(extra or {})}, "envbuild.toml", "0" * 64)


def test_the_engine_setting_layers_flag_then_variable_then_envbuild_toml_then_docker() -> None:
    podman_spec = spec({"build": {"engine": "podman"}})
    assert build_settings({}, spec(), {}).engine == "docker"
    settings = build_settings({}, podman_spec, {})
    assert (settings.engine, settings.sources["engine"]) == ("podman", "envbuild.toml")
    settings = build_settings({}, podman_spec, {"ENVBUILD_ENGINE": "docker"})
    assert (settings.engine, settings.sources["engine"]) == ("docker", "ENVBUILD_ENGINE")
    settings = build_settings({"engine": "podman"}, spec(), {"ENVBUILD_ENGINE": "docker"})
    assert (settings.engine, settings.sources["engine"]) == ("podman", "--engine")


def test_a_bad_engine_variable_or_spec_value_names_where_and_what_is_accepted() -> None:
    with pytest.raises(UsageError) as raised:
        layered(rule_named("engine"), None, {"ENVBUILD_ENGINE": "lxc"}, None)
    assert raised.value.message == "ENVBUILD_ENGINE='lxc' is not docker or podman"
    assert raised.value.fix == "set it to docker or podman (e.g. ENVBUILD_ENGINE=podman), or unset it"
    with pytest.raises(UsageError) as raised:
        spec({"build": {"engine": "lxc"}})
    assert "[build] engine" in raised.value.render() and "accepted: docker, podman" in raised.value.render()
    with pytest.raises(UsageError) as raised:
        spec({"build": {"engines": "podman"}})
    assert "engines" in raised.value.render()
    with pytest.raises(UsageError) as raised:
        engine_named("lxc")
    assert raised.value.fix == "use one of: docker, podman"


def test_podman_builds_with_podman_build_and_refuses_dockers_builders() -> None:
    with selected("podman") as engine:
        assert isinstance(engine, PodmanEngine)
        assert choose_backend("auto") == "podman" and choose_backend("podman") == "podman"
        with pytest.raises(UsageError) as raised:
            choose_backend("buildkit")
        assert (
            raised.value.fix == "use --builder auto with --engine podman, or --engine docker for this builder"
        )
    assert runs_mounts("podman") and runs_mounts("buildkit") and not runs_mounts("api")


def test_selected_puts_the_previous_engine_back() -> None:
    with selected("docker") as docker:
        with selected("podman") as podman:
            assert podman.name == "podman"
            with selected("podman") as again:
                assert again is podman  # one per process: a service it started is reused
        with selected("docker") as same:
            assert same is docker


@pytest.mark.parametrize(
    ("engine", "access", "specs", "expected"),
    [
        ("docker", "auto", "empty", "legacy"),
        ("docker", "auto", "nvidia", "cdi"),
        ("podman", "auto", "nvidia", "cdi"),
        ("podman", "cdi", "nvidia", "cdi"),
        ("docker", "legacy", "nvidia", "legacy"),
    ],
)
def test_the_gpu_path_each_engine_takes(
    engine: str, access: str, specs: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVBUILD_CDI_SPEC_DIRS", str(FIXTURES / "cdi" / specs))
    assert engine_gpu_path(engine_named(engine), access) == expected


def test_podman_without_a_cdi_spec_or_asked_for_legacy_has_no_gpu_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENVBUILD_CDI_SPEC_DIRS", str(FIXTURES / "cdi" / "empty"))
    podman = engine_named("podman")
    with pytest.raises(VerifyError) as raised:
        engine_gpu_path(podman, "auto")
    assert raised.value.message.startswith("no CDI device nvidia.com/gpu on this host")
    assert "legacy" not in (raised.value.fix or "")
    with pytest.raises(VerifyError) as raised:
        engine_gpu_path(podman, "legacy")
    assert raised.value.message == "Podman has no legacy GPU request: it reaches GPUs only through CDI"
    with pytest.raises(VerifyError) as raised:  # Docker offers its other path
        engine_gpu_path(engine_named("docker"), "cdi")
    assert raised.value.fix.endswith("or run with --gpu-access legacy")  # type: ignore[union-attr]


def test_rootless_is_read_from_libpods_own_info() -> None:
    # podman 4.3.1's /libpod/info host.security, run by a user with subuids (trimmed), and as root
    security = {"apparmorEnabled": False, "rootless": True, "seccompEnabled": True, "selinuxEnabled": False}
    assert rootless_of({"host": {"security": security}}) is True
    assert rootless_of({"host": {"security": {**security, "rootless": False}}}) is False
    assert rootless_of({"host": {"security": {"rootless": "yes"}}}) is None  # not a boolean: not said
    assert rootless_of({"SecurityOptions": ["name=seccomp,profile=default"]}) is None  # the compat info


def test_container_host_must_be_a_unix_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTAINER_HOST", "ssh://core@host/run/podman/podman.sock")
    with pytest.raises(EngineError) as raised:
        PodmanEngine().client()
    assert raised.value.message.startswith("CONTAINER_HOST='ssh://core@host")
    assert "unix:///path/to/podman.sock" in (raised.value.fix or "")


def test_the_default_socket_is_podman_sockets_for_this_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert default_socket() == "/run/user/1000/podman/podman.sock"
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert default_socket() == "/run/podman/podman.sock"


def test_a_missing_podman_is_an_error_with_the_install_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CONTAINER_HOST", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no socket answers there
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("ENVBUILD_PODMAN", raising=False)
    with pytest.raises(EngineError) as raised:
        PodmanEngine().client()
    assert raised.value.message == "podman is not installed (no podman on PATH)"
    assert raised.value.fix.startswith("install podman")  # type: ignore[union-attr]
