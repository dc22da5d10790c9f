"""The preflight guard (issue 36): its judge as a table, the real fixture roots, the facts render
writes, and the guard as Python runs it from a .pth file (in a subprocess, with a site directory of
the test's own: the in-image run is tests/engine/test_preflight_image.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.matrix.load import load_matrix
from envbuild.preflight import (
    MODULE_NAME,
    PROGRAMS_DIR,
    STOP_STATUS,
    format_facts,
    guard_files,
    judge,
    message,
)
from envbuild.preflight.programs import envbuild_preflight as guard_module

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "preflight"
TORCH_SPEC = (
    '[stack]\ndriver = "550"\nframework = "torch==2.5.1"\ngpus = ["H100"]\nstrategy = "wheels"\n'
    'os = "ubuntu22.04"\n\n[image]\nrepository = "registry.example/team/torch"\n'
)


@pytest.fixture(scope="module")
def torch_facts(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The preflight.facts `envbuild render` writes for torch 2.5.1 cu124 (floor 550.54.14), as the
    guard reads it."""
    folder = tmp_path_factory.mktemp("facts")
    (folder / "envbuild.toml").write_text(TORCH_SPEC)
    assert main(["render", "-f", str(folder / "envbuild.toml"), "-o", str(folder / "out")]) == 0
    document = guard_module.read_facts(str(folder / "out" / "default" / "preflight.facts"))
    assert document is not None
    return document


def facts(
    arch: str, *, min_driver: str = "550.54.14", compat: str = "native", gpus: dict | None = None
) -> dict:
    return {
        "version": 1,
        "stack": "torch 2.5.1 (cu124, CUDA 12.4)",
        "cuda": "12.4",
        "compat": compat,
        "min_driver": min_driver,
        "arch": arch,
        "platform": "linux/amd64",
        "gpus": gpus
        if gpus is not None
        else {
            "h100": ["H100", "9.0", 520, None],
            "v100": ["Tesla V100", "7.0", None, 580],
            "k80": ["Tesla K80", "3.7", None, 470],
            "b200": ["B200", "10.0", 570, None],
            "rtx4090": ["RTX 4090", "8.9", 520, None],
        },
    }


# ---------------------------------------------------------------------------------------------
# the judge, as a table: driver x GPUs x image facts


@pytest.mark.parametrize(
    ("arch", "compat", "min_driver", "driver", "gpu", "verdict", "kernels", "says"),
    [
        # driver floors, native and under minor-version compatibility
        ("8.0;9.0", "native", "550.54.14", "550.54.14", "NVIDIA H100 80GB HBM3", "ok", "sass", None),
        (
            "8.0;9.0",
            "native",
            "550.54.14",
            "550.54.13",
            "NVIDIA H100 80GB HBM3",
            "stop",
            "sass",
            "older than 550.54.14",
        ),
        ("8.0;9.0", "native", "550.54.14", "535.104.05", "NVIDIA H100 80GB HBM3", "stop", "sass", "natively"),
        ("8.0;9.0", "minor", "525.60.13", "535.104.05", "NVIDIA H100 80GB HBM3", "ok", "sass", None),
        (
            "8.0;9.0",
            "minor",
            "525.60.13",
            "470.82.01",
            "NVIDIA H100 80GB HBM3",
            "stop",
            "sass",
            "minor-version",
        ),
        # SASS of the same major, and a later minor of it
        ("8.0;8.6;9.0", "native", "550.54.14", "560.35.03", "NVIDIA GeForce RTX 4090", "ok", "sass", None),
        ("8.0", "native", "550.54.14", "560.35.03", "NVIDIA H100 80GB HBM3", "stop", None, "has no kernels"),
        # PTX JIT: it counts natively, never under minor-version compatibility
        ("8.0+PTX", "native", "550.54.14", "560.35.03", "NVIDIA H100 80GB HBM3", "ok", "ptx", None),
        ("8.0+PTX", "minor", "525.60.13", "535.104.05", "NVIDIA H100 80GB HBM3", "stop", None, "PTX only"),
        (
            "9.0+PTX",
            "native",
            "550.54.14",
            "560.35.03",
            "Tesla V100-SXM2-16GB",
            "stop",
            None,
            "has no kernels",
        ),
        # the last driver branch (K80: R470; V100: R580) and the first (B200: R570)
        ("3.7;5.0;7.0", "native", "450.80.02", "470.256.02", "Tesla K80", "ok", "sass", None),
        (
            "3.7;5.0;7.0",
            "native",
            "450.80.02",
            "550.54.14",
            "Tesla K80",
            "stop",
            "sass",
            "only up to driver branch R470",
        ),
        ("7.0;8.0", "native", "550.54.14", "590.44.01", "Tesla V100-SXM2-16GB", "stop", "sass", "R580"),
        (
            "10.0",
            "native",
            "550.54.14",
            "560.35.03",
            "NVIDIA B200",
            "stop",
            "sass",
            "needs an R570 or newer driver",
        ),
        ("10.0", "native", "550.54.14", "570.86.15", "NVIDIA B200", "ok", "sass", None),
    ],
)
def test_the_judge(
    arch: str, compat: str, min_driver: str, driver: str, gpu: str, verdict: str, kernels, says
) -> None:
    document = judge(facts(arch, compat=compat, min_driver=min_driver), driver, [("0000:01:00.0", gpu)])
    assert document["verdict"] == verdict, document
    assert document["found"]["gpus"][0]["kernels"] == kernels
    if says:
        assert any(says in p for p in document["problems"]), document["problems"]
    else:
        assert document["problems"] == []


def test_a_stop_names_what_was_found_what_is_needed_and_both_fixes() -> None:
    document = judge(facts("5.0;7.0;8.0;9.0"), "535.104.05", [("0000:06:00.0", "Tesla V100-SXM2-16GB")])
    text = message(document)
    assert "NVIDIA driver 535.104.05" in text and "Tesla V100-SXM2-16GB (compute capability 7.0)" in text
    assert "needs: driver 550.54.14 or newer (CUDA 12.4" in text
    assert "fix: run it on a node with an R550 or newer driver" in text
    assert (
        "fix: or build an image this node can run: "
        "envbuild resolve --driver 535.104.05 --gpu 'Tesla V100-SXM2-16GB'" in text
    )
    assert f"exit status {STOP_STATUS}" in text


def test_a_name_from_the_node_reaches_the_fix_only_as_one_shell_word() -> None:
    hostile = "Tesla V100'; rm -rf / #"
    document = judge(facts("7.0"), "384.98", [("0000:06:00.0", hostile)])
    assert document["fixes"][-1].endswith("--gpu 'Tesla V100'\"'\"'; rm -rf / #'")


def test_an_unknown_name_asks_nvidia_smi_once_and_then_judges_its_capability() -> None:
    asked = []

    def smi() -> dict:
        asked.append(1)
        return {"NVIDIA A10G": (8, 6)}

    gpus = [("0000:00:1e.0", "NVIDIA A10G"), ("0000:00:1f.0", "NVIDIA A10G")]
    document = judge(facts("8.0;9.0"), "565.57.01", gpus, smi=smi)
    assert asked == [1] and document["verdict"] == "ok"
    assert [g["cc"] for g in document["found"]["gpus"]] == ["8.6", "8.6"]
    document = judge(facts("9.0"), "565.57.01", gpus, smi=smi)
    assert document["verdict"] == "stop" and "compute capability 8.6" in document["problems"][0]


def test_an_unknown_name_without_nvidia_smi_skips_the_gpu_check_and_says_so() -> None:
    document = judge(facts("8.0;9.0"), "565.57.01", [("0000:00:1e.0", "NVIDIA A10G")], smi=lambda: None)
    assert document["verdict"] == "unchecked"
    assert "not in this image's GPU catalogue" in message(document)


def test_a_capability_the_caller_knows_is_used_as_it_is() -> None:
    """doctor hands the judge nvidia-smi's compute_cap for every GPU: no lookup can override it."""
    document = judge(facts("8.0"), "565.57.01", [("0", "Some Future GPU", (12, 0))])
    assert document["verdict"] == "stop" and document["found"]["gpus"][0]["cc"] == "12.0"


# ---------------------------------------------------------------------------------------------
# the fixture roots: real /proc files (tests/fixtures/preflight/SOURCES.md)


@pytest.mark.parametrize(
    ("root", "verdict", "driver", "ccs"),
    [
        ("v100-r384", "stop", "384.98", ["7.0"]),
        ("v100-r565", "ok", "565.57.01", ["7.0"]),
        ("a10g-r565", "unchecked", "565.57.01", [None]),
        ("h100-r525", "stop", "525.60.11", ["9.0"]),
        ("h100-v100-r565", "ok", "565.57.01", ["7.0", "9.0"]),
        ("no-driver", "no-driver", None, []),
    ],
)
def test_the_fixture_roots(torch_facts: dict, root: str, verdict: str, driver, ccs: list) -> None:
    document = guard_module.evaluate(root=str(FIXTURES / root), facts=torch_facts)
    assert document["verdict"] == verdict, document
    assert document["found"]["driver"] == driver
    assert [g["cc"] for g in document["found"]["gpus"]] == ccs


def test_the_driver_file_fallback_and_a_file_too_big_to_be_the_drivers(tmp_path: Path) -> None:
    (tmp_path / "sys/module/nvidia").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia/version").write_text("570.86.15\n")
    assert guard_module.read_driver(str(tmp_path)) == "570.86.15"
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text("x" * (guard_module.MAX_FILE_BYTES + 1))
    assert guard_module.read_driver(str(tmp_path)) == "570.86.15"  # the oversized file is not read


# ---------------------------------------------------------------------------------------------
# the facts render writes


def test_the_facts_place_every_catalogue_gpu_of_the_platform(torch_facts: dict) -> None:
    matrix = load_matrix()
    assert torch_facts["min_driver"] == "550.54.14" and torch_facts["compat"] == "native"
    assert torch_facts["arch"] == "5.0;6.0;7.0;7.5;8.0;8.6;9.0"
    for gpu in matrix.gpus:
        if gpu.integrated or (gpu.host_platforms and "linux/amd64" not in gpu.host_platforms):
            assert guard_module.lookup(torch_facts, gpu.name) is None, gpu.name  # Jetson, Grace parts
            continue
        for name in (gpu.name, *gpu.aliases):
            row = guard_module.lookup(torch_facts, name)
            assert row is not None and row[0] == gpu.name and row[1] == f"{gpu.cc[0]}.{gpu.cc[1]}", name
            assert row[3] == gpu.max_driver_branch


def test_the_facts_of_an_arm64_image_carry_the_grace_parts(tmp_path: Path) -> None:
    spec = (
        TORCH_SPEC.replace('gpus = ["H100"]', 'gpus = ["GH200"]\nplatform = "linux/arm64"')
        .replace('driver = "550"', 'driver = "580"')
        .replace("torch==2.5.1", "torch")
        + 'installer = "pip"\n'  # no uv for aarch64 on this x86_64 host
    )
    (tmp_path / "envbuild.toml").write_text(spec)
    assert main(["render", "-f", str(tmp_path / "envbuild.toml"), "-o", str(tmp_path / "out")]) == 0
    document = guard_module.read_facts(str(tmp_path / "out" / "default" / "preflight.facts"))
    assert document["platform"] == "linux/arm64"
    assert guard_module.lookup(document, "NVIDIA GH200 480GB")[0] == "GH200"


def test_the_context_carries_the_guard_unchanged() -> None:
    files = guard_files({"version": 1})
    assert files[MODULE_NAME] == (Path(PROGRAMS_DIR) / MODULE_NAME).read_bytes()
    assert files["00-envbuild-preflight.pth"] == b"import envbuild_preflight; envbuild_preflight.guard()\n"


def test_the_guard_keeps_to_the_standard_library() -> None:
    """It runs in images where envbuild is not installed, on Python 3.8 and later."""
    tree = ast.parse((Path(PROGRAMS_DIR) / MODULE_NAME).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(name=node.module or "")])
    }
    assert imported <= {"__future__", "os", "sys", "json", "shlex", "shutil", "subprocess"}, imported
    ast.parse((Path(PROGRAMS_DIR) / MODULE_NAME).read_text(), feature_version=(3, 8))


# ---------------------------------------------------------------------------------------------
# the guard as Python runs it: a site directory with the module and a .pth of the test's own


def site(tmp_path: Path, document: dict) -> Path:
    directory = tmp_path / "site"
    directory.mkdir()
    (directory / MODULE_NAME).write_bytes((Path(PROGRAMS_DIR) / MODULE_NAME).read_bytes())
    (tmp_path / "preflight.facts").write_text(format_facts(document))
    (directory / "00-envbuild-preflight.pth").write_text(
        f"import envbuild_preflight; envbuild_preflight.guard({str(tmp_path / 'preflight.facts')!r})\n"
    )
    return directory


def python(directory: Path, root: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    program = f"import site; site.addsitedir({str(directory)!r})\n" + code
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ENVBUILD_PREFLIGHT")}
    return subprocess.run(
        [sys.executable, "-I", "-c", program],
        env={**clean, "ENVBUILD_PREFLIGHT_ROOT": str(root), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_old_driver_stops_the_program_before_its_code(tmp_path: Path, torch_facts: dict) -> None:
    done = python(site(tmp_path, torch_facts), FIXTURES / "v100-r384", "print('ran')")
    assert done.returncode == STOP_STATUS and "ran" not in done.stdout
    assert "driver 384.98 is older than 550.54.14" in done.stderr


def test_warn_runs_it_and_off_says_nothing(tmp_path: Path, torch_facts: dict) -> None:
    directory = site(tmp_path, torch_facts)
    warned = python(directory, FIXTURES / "v100-r384", "print('ran')", ENVBUILD_PREFLIGHT="warn")
    assert warned.returncode == 0 and warned.stdout == "ran\n" and "running it anyway" in warned.stderr
    off = python(directory, FIXTURES / "v100-r384", "print('ran')", ENVBUILD_PREFLIGHT="off")
    assert (off.returncode, off.stdout, off.stderr) == (0, "ran\n", "")
    typo = python(directory, FIXTURES / "v100-r384", "print('ran')", ENVBUILD_PREFLIGHT="strcit")
    assert typo.returncode == STOP_STATUS and "'strcit' is not strict, warn or off" in typo.stderr


def test_all_is_well_is_silent_and_no_driver_is_one_line(tmp_path: Path, torch_facts: dict) -> None:
    directory = site(tmp_path, torch_facts)
    good = python(directory, FIXTURES / "v100-r565", "print('ran')")
    assert (good.returncode, good.stdout, good.stderr) == (0, "ran\n", "")
    none = python(directory, FIXTURES / "no-driver", "print('ran')")
    assert none.returncode == 0 and none.stdout == "ran\n"
    assert none.stderr.count("\n") == 1 and "no NVIDIA driver is visible" in none.stderr


def test_child_processes_inherit_the_verdict(tmp_path: Path, torch_facts: dict) -> None:
    """A DataLoader worker or torchrun rank is a child: it finds the verdict and judges nothing again."""
    again = f"import site; site.addsitedir({str(tmp_path / 'site')!r})"
    child = (
        "import subprocess, sys, os\n"
        "print(os.environ['ENVBUILD_PREFLIGHT_VERDICT'].rsplit('=', 1)[1])\n"
        f"subprocess.run([sys.executable, '-I', '-c', {again!r}], check=True)\n"
    )
    done = python(site(tmp_path, torch_facts), FIXTURES / "no-driver", child)
    assert done.returncode == 0 and done.stdout == "no-driver\n"
    assert done.stderr.count("no NVIDIA driver is visible") == 1  # the parent's line, not the child's


def test_a_verdict_for_another_node_or_image_is_not_taken(tmp_path: Path, torch_facts: dict) -> None:
    """Apptainer and Enroot pass the host's environment in: a stale verdict must not wave an image through."""
    done = python(
        site(tmp_path, torch_facts),
        FIXTURES / "v100-r384",
        "print('ran')",
        ENVBUILD_PREFLIGHT_VERDICT="othernode/1-2=ok",
    )
    assert done.returncode == STOP_STATUS


@pytest.mark.parametrize("root", ["no-driver", "h100-r580", "v100-r565"])
def test_the_guard_imports_neither_re_nor_json_to_judge(tmp_path: Path, torch_facts: dict, root: str) -> None:
    """`import json` brings `re` (6 ms of a 10 ms start): the facts are a line format instead. Judged
    all the way: the driver, the facts file, the GPUs, the verdict (a stop's message imports shlex,
    which may bring re: that start ends anyway)."""
    (tmp_path / "preflight.facts").write_text(format_facts(torch_facts))
    code = (
        f"import sys; sys.path.insert(0, {PROGRAMS_DIR!r}); import envbuild_preflight as g\n"
        "d = g.evaluate(root=sys.argv[1], facts_path=sys.argv[2])\n"
        "print(d['verdict'], sorted(m for m in ('re', 'json') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(FIXTURES / root), str(tmp_path / "preflight.facts")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    verdict, modules = done.stdout.split(" ", 1)
    assert verdict in ("no-driver", "ok", "stop")
    if verdict != "stop":
        assert modules == "[]\n"


def test_the_facts_file_reads_back_what_was_written(torch_facts: dict) -> None:
    assert guard_module.parse_facts(format_facts(torch_facts)) == torch_facts
    assert guard_module.parse_facts('{"version": 1}') is None  # not envbuild's line format


def test_the_command_prints_one_line_and_exits_with_the_verdicts_status(
    tmp_path: Path, torch_facts: dict
) -> None:
    (tmp_path / "preflight.facts").write_text(format_facts(torch_facts))
    code = (
        f"import sys; sys.path.insert(0, {PROGRAMS_DIR!r}); import envbuild_preflight as g\n"
        f"g.FACTS_FILE = {str(tmp_path / 'preflight.facts')!r}\n"
        "g.evaluate.__defaults__ = (None, g.FACTS_FILE, None)\n"
        "sys.exit(g.main([]))"
    )
    for root, status, line in (
        ("v100-r565", 0, "envbuild preflight: ok: driver 565.57.01 (needs 550.54.14)"),
        ("v100-r384", STOP_STATUS, "envbuild preflight: stop: driver 384.98"),
    ):
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code],
            env={**os.environ, "ENVBUILD_PREFLIGHT_ROOT": str(FIXTURES / root)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == status and done.stdout.startswith(line), done
        assert done.stdout.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# doctor --image: the guard's judge on the host, from the image's labels and captured nvidia-smi


def labels_of(dockerfile: Path) -> dict[str, str]:
    """The io.envbuild.* labels of a golden Dockerfile (what the built image carries)."""
    import re

    return dict(re.findall(r'"(io\.envbuild\.[a-z.-]+)"="([^"]*)"', dockerfile.read_text()))


@pytest.mark.parametrize(
    ("banner", "status", "says"),
    [
        ("banner_550_h100_8gpu.txt", "ok", "lets it start: driver 550.127.05 >= 550.54.14"),
        ("banner_535_a100_4gpu_processes.txt", "fail", "driver 535.216.01 is older than 550.54.14"),
        ("banner_470_geforce_processes.txt", "fail", "driver 470.63.01 is older"),
    ],
)
def test_doctor_runs_the_guards_judge_on_the_host(banner: str, status: str, says: str) -> None:
    from envbuild.host.imageguard import preflight_check
    from envbuild.host.nvsmi import parse_banner

    smi = parse_banner((FIXTURES.parent / "nvidia-smi" / banner).read_text())
    labels = labels_of(FIXTURES.parents[1] / "golden" / "wheels-torch" / "Dockerfile")
    check = preflight_check(load_matrix(), smi, "team/torch:1", labels)
    assert check is not None and check.status == status and says in check.evidence, check
    if status == "fail":
        assert "envbuild resolve --driver" in check.fix and "R550 or newer" in check.fix


def test_doctor_has_no_preflight_verdict_for_an_image_envbuild_did_not_build() -> None:
    from envbuild.host.imageguard import preflight_check

    assert preflight_check(load_matrix(), None, "ubuntu:22.04", {}) is None
