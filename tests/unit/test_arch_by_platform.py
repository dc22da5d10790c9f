"""Issue 34, items 4 and 5: a framework build's kernel list per platform, and the arm64 builds.

PyTorch's aarch64 CUDA wheels are compiled for fewer GPUs than its x86_64 wheels of the same tag
(RELEASE.md's "architectures supported for Linux aarch64 builds": 8.0 and up, no sm_75), so a T4G host
(AWS g5g: a T4 on arm64) must not be offered the arm64 wheel of a build whose x86_64 wheel runs on a T4.
Every reader takes the list of the build's own platform: resolve's kernel check, the stack JSON (which
the lock and the build record, hence the SBOM, repeat) and render's io.envbuild.gpu-arch label.

The bundled-matrix cases are the issue's own queries; the rule cases use the hand-written minimatrix.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest

from envbuild._util import toml
from envbuild.attest import fields
from envbuild.attest.record import BuildRecord
from envbuild.attest.sbom import build_sbom
from envbuild.cli.app import main
from envbuild.errors import MatrixError
from envbuild.image.inventory import parse_inventory
from envbuild.matrix.check import check_matrix
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix
from envbuild.refresh.arch_audit import ArchAudit, WheelKernels, pick_aarch64_wheel
from envbuild.refresh.edit import apply_edit
from envbuild.refresh.kernel_facts import compare, measure
from envbuild.refresh.model import Finding
from envbuild.refresh.upstream import DistFile
from envbuild.resolve.query import build_query
from envbuild.resolve.report import stack_json
from envbuild.resolve.solver import resolve
from tests.helpers.minimatrix import write_minimatrix
from tests.helpers.paths import FIXTURES

# the end-to-end engine test's build record and image inventory (tests/unit/test_attest_sbom.py)
RECORD = json.loads((FIXTURES / "attest" / "record.json").read_text(encoding="utf-8"))
_CAPTURE = (FIXTURES / "attest" / "inventory-torch.txt").read_text(encoding="utf-8")
INVENTORY = parse_inventory(_CAPTURE, _CAPTURE.split("\n", 1)[0].rsplit(" ", 1)[0], {})
SUBJECT = ("127.0.0.1:5000/envbuild-test/e2e", RECORD["pushed"][0]["digest"])

# torch 2.14.1's PyPI aarch64 wheel (cu130), measured: SASS for 8.0, 9.0, 10.0, 11.0 and 12.0 and no PTX
# (RELEASE.md's aarch64 row says 12.0+PTX); its x86_64 wheel has 7.5 and 8.6 and no 11.0
ARM64_CU130 = "8.0;9.0;10.0;11.0;12.0"
ARM64_WHEEL = (
    "https://files.pythonhosted.org/packages/8d/0e/21281ff4015779255229f487f4481c5bfba53b8c83e01eaa4a8a8f1180c9/"
    "torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl"
    "#sha256=ef1276fd07adb8d463ac402a24ea7482e45c9a42df8ebdac211aa757779200ba"
)


def _resolve_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["resolve", *args, "--framework", "torch", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_an_arm64_t4_gets_no_torch_build_without_sm_75(
    matrix: Matrix, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document = _resolve_json(
        capsys, "--platform", "linux/arm64", "--gpu", "T4", "--driver", "580.65.06"
    )
    fw = matrix.framework("torch")
    assert fw is not None
    by_name = {(r.version, v.name): v for r in fw.releases for v in r.variants}
    for stack in document["stacks"]:  # whatever is offered carries sm_75 kernels on arm64
        variant = by_name[(stack["framework_version"], stack["variant"])]
        assert variant.arch_for("linux/arm64").covers((7, 5)), stack
    reasons = {r["candidate"]: r for r in document["rejected"]}
    rejected = reasons["torch 2.14.1+cu130"]
    assert rejected["kind"] == "gpu"
    assert (
        f"T4 (sm_75, compute capability 7.5) is not in the build's linux/arm64 archs {ARM64_CU130}"
        in (rejected["reason"])
    )
    assert code == 3


def test_the_same_t4_on_amd64_still_gets_the_cu130_build(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = _resolve_json(
        capsys, "--platform", "linux/amd64", "--gpu", "T4", "--driver", "580.65.06"
    )
    top = document["stacks"][0]
    assert (code, top["framework_version"], top["variant"]) == (0, "2.14.1", "cu130")
    assert top["arch"] == "7.5;8.0;8.6;9.0;10.0;12.0"  # the x86_64 wheel's list, measured


def test_gh200_on_r560_gets_a_cu126_aarch64_build(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = _resolve_json(
        capsys, "--gpu", "GH200", "--driver", "560.35.05", "--platform", "linux/arm64"
    )
    assert code == 0 and document["platform"] == "linux/arm64"
    top = document["stacks"][0]
    assert (top["framework_version"], top["variant"], top["cuda"]) == ("2.14.1", "cu126", "12.6")
    assert top["arch"] == "8.0;9.0" and top["arch_source"] is None  # RELEASE.md's aarch64 row, not a wheel


def test_gb200_on_r570_gets_torch_2_11_cu128_not_2_7(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = _resolve_json(capsys, "--gpu", "GB200", "--driver", "570.86.15")
    top = document["stacks"][0]
    assert (code, top["framework_version"], top["variant"]) == (0, "2.11.0", "cu128")
    assert top["arch"] == "8.0;9.0;10.0;12.0"


def test_every_per_platform_list_is_for_a_published_platform_and_cited(matrix: Matrix) -> None:
    entries = [
        (v, e)
        for fw in matrix.frameworks
        for r in fw.releases
        for v in r.variants
        for e in v.arch_by_platform
    ]
    assert len(entries) > 10
    for variant, entry in entries:
        assert entry.platform in variant.platforms and entry.source.startswith("https://"), variant.prov.where
        # no PyTorch aarch64 build carries Maxwell..Turing or 8.6 kernels (build_cuda.sh's aarch64 filter)
        assert not {(5, 0), (6, 0), (7, 0), (7, 5), (8, 6)} & entry.arch.sass, variant.prov.where


def test_no_pypi_build_is_arm64_while_pypis_aarch64_wheel_is_cpu_only(matrix: Matrix) -> None:
    """A release's PyPI build installs from PyPI (render, resolve's install line), and PyPI's torch
    aarch64 wheel is CPU-only up to 2.10: marking that build arm64 would put a CPU torch in a GPU image,
    even where download.pytorch.org/whl/<tag> has the sbsa wheel of the same tag (2.9, 2.10 cu128)."""
    fw = matrix.framework("torch")
    assert fw is not None
    for release in fw.releases:
        pypi = (
            next(v for v in release.variants if v.name == release.pypi_variant)
            if release.pypi_variant
            else None
        )
        if pypi is not None and release.key < (2, 11):
            assert "linux/arm64" not in pypi.platforms, release.version


# --- the rules, on the minimatrix ------------------------------------------------------------------

FW = """[framework]
name = "torch"
display_name = "PyTorch"
package = "torch"
platforms = ["linux/amd64"]
source = "https://example.org/primary"

[[release]]
versions = ["2.14.1"]
python = ["3.11"]
source = "https://example.org/primary"

  [[release.variant]]
  name = "cu126"
  cuda = "12.6"
  index_url = "https://download.pytorch.org/whl/cu126"
  cuda_from = "wheels"
  platforms = {platforms}
  platforms_source = "https://example.org/index"
  arch = "5.0;6.0;7.0;7.5;8.0;8.6;9.0"
{extra}  source = "https://example.org/primary"
"""
BOTH = '["linux/amd64", "linux/arm64"]'
OVERRIDE = (
    '  arch_by_platform = { "linux/arm64" = "9.0" }\n'
    '  arch_by_platform_source = { "linux/arm64" = "https://example.org/release-md" }\n'
)


def _matrix(tmp_path: Path, platforms: str = BOTH, extra: str = OVERRIDE) -> Path:
    root = write_minimatrix(tmp_path / "matrix")
    for other in (root / "frameworks").iterdir():
        other.unlink()
    (root / "frameworks" / "torch.toml").write_text(FW.format(platforms=platforms, extra=extra))
    return root


def test_each_platform_reads_its_own_list(tmp_path: Path) -> None:
    matrix = load_matrix(_matrix(tmp_path))
    assert check_matrix(matrix) == []
    variant = matrix.frameworks[0].releases[0].variants[0]
    assert variant.arch_for("linux/arm64").describe() == "9.0"
    assert variant.arch_for("linux/amd64").describe() == "5.0;6.0;7.0;7.5;8.0;8.6;9.0"
    for platform, covered in (("linux/amd64", True), ("linux/arm64", False)):
        query = build_query(matrix, driver="560", gpus=["L4"], platform=platform)  # 8.9: sm_86 runs it
        result = resolve(matrix, query)
        assert bool(result.stacks) is covered, platform
    query = build_query(matrix, driver="560", gpus=["H100"], platform="linux/arm64")
    stack = resolve(matrix, query).stacks[0]
    assert (stack.platform, stack_json(stack)["arch"]) == ("linux/arm64", "9.0")


@pytest.mark.parametrize(
    ("extra", "wanted"),
    [
        pytest.param(
            '  arch_by_platform = { "aarch64" = "8.0" }\n',
            "'aarch64' is not a platform (write one of: linux/amd64, linux/arm64)",
            id="non-canonical-platform",
        ),
        pytest.param(
            '  arch_by_platform = { "linux/arm64" = "8.0;sm_9x" }\n'
            '  arch_by_platform_source = { "linux/arm64" = "https://example.org/x" }\n',
            "linux/arm64 = '8.0;sm_9x': expected an arch list",
            id="list-parsed-like-arch",
        ),
        pytest.param(
            '  arch_by_platform = { "linux/arm64" = "8.0;9.0" }\n',
            "arch_by_platform gives linux/arm64 a list without a source",
            id="no-source",
        ),
        pytest.param(
            '  arch_by_platform_source = { "linux/arm64" = "https://example.org/x" }\n',
            "arch_by_platform_source names linux/arm64, which arch_by_platform does not list",
            id="source-without-list",
        ),
    ],
)
def test_the_schema_refuses_a_bad_override(tmp_path: Path, extra: str, wanted: str) -> None:
    with pytest.raises(MatrixError) as raised:
        load_matrix(_matrix(tmp_path, extra=extra))
    assert wanted in raised.value.message and "torch.toml" in raised.value.message


def test_matrix_check_refuses_a_list_for_a_platform_the_build_lacks(tmp_path: Path) -> None:
    problems = check_matrix(load_matrix(_matrix(tmp_path, platforms='["linux/amd64"]')))
    assert any(
        "arch_by_platform linux/arm64: the build is not published for linux/arm64" in p for p in problems
    ), problems


def test_matrix_check_refuses_a_list_equal_to_arch(tmp_path: Path) -> None:
    same = OVERRIDE.replace('"9.0"', '"5.0;6.0;7.0;7.5;8.0;8.6;9.0"')
    problems = check_matrix(load_matrix(_matrix(tmp_path, extra=same)))
    assert any("the same list as arch" in p for p in problems), problems


# --- render's label, the stack JSON and the SBOM ---------------------------------------------------

SPEC = """[stack]
driver = "580"
framework = "torch==2.14.1"
gpus = ["H100"]
strategy = "wheels"
os = "ubuntu22.04"
platform = ["linux/amd64", "linux/arm64"]

[image]
repository = "registry.example/team/torch"
installer = "pip"
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("render")
    (root / "envbuild.toml").write_text(SPEC)
    assert main(["render", "-f", str(root / "envbuild.toml"), "-o", str(root / "out")]) == 0
    return root / "out" / "default"


def test_each_platforms_image_is_labelled_with_its_own_kernels(rendered: Path) -> None:
    amd = (rendered / "amd64" / "Dockerfile").read_text()
    arm = (rendered / "arm64" / "Dockerfile").read_text()
    assert '"io.envbuild.gpu-arch"="7.5;8.0;8.6;9.0;10.0;12.0"' in amd
    assert f'"io.envbuild.gpu-arch"="{ARM64_CU130}"' in arm
    arm_stack = json.loads((rendered / "arm64" / "stack.json").read_text())
    assert (arm_stack["arch"], arm_stack["arch_source"]) == (ARM64_CU130, ARM64_WHEEL)  # not the x86_64 wheel


def test_the_sbom_of_an_arm64_build_names_the_arm64_kernels(rendered: Path) -> None:
    """The build record's stack is the plan's stack document (pipeline), which stack.json holds."""
    record = copy.deepcopy(RECORD)
    record["stack"] = {**record["stack"], **json.loads((rendered / "arm64" / "stack.json").read_text())}
    record["platform"] = "linux/arm64"
    sbom = build_sbom(BuildRecord.from_json(record), INVENTORY, subject=SUBJECT)
    assert fields.sbom_property(sbom, fields.P_GPU_ARCH) == ARM64_CU130
    assert fields.sbom_property(sbom, fields.P_PLATFORM) == "linux/arm64"


# --- item 6: back to R470 --------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", ["Tesla P4", "Tesla P100", "Tesla K80"])  # 6.1 runs the sm_60 cubins
def test_an_r470_host_on_python_3_10_gets_torch_1_12_1_cu113_natively(
    gpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """R470 runs CUDA <= 11.4 natively; 1.12's cu113 build (builder release/1.12: 3.7;...;8.6) is the
    newest torch for it. Before 1.12 was in the matrix the torch rows started at 1.13 (cu116+)."""
    code, document = _resolve_json(capsys, "--gpu", gpu, "--driver", "470.82.01", "--python", "3.10")
    top = document["stacks"][0]
    assert code == 0
    assert (top["framework_version"], top["variant"], top["compat"]) == ("1.12.1", "cu113", "native")
    assert (top["cuda"], top["cudnn"], top["python"]) == ("11.3", "8.3.2.44", "3.10")
    assert top["index_url"] == "https://download.pytorch.org/whl/cu113"


# --- `matrix refresh --audit` on a linux/arm64 row: the aarch64 wheel's list goes into arch_by_platform


def _wheel(filename: str, sha: str = "cd" * 32) -> DistFile:
    return DistFile(
        filename=filename,
        url=f"https://files.example.org/{filename}",
        requires_python=None,
        yanked=False,
        sha256=sha,
    )


def test_the_aarch64_wheel_picked_is_cp311_and_never_x86_64_or_free_threaded() -> None:
    files = [
        _wheel("torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"),
        _wheel("torch-2.14.1-cp313-cp313t-manylinux_2_28_aarch64.whl"),
        _wheel("torch-2.14.1-cp312-cp312-manylinux_2_28_aarch64.whl"),
        _wheel("torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl"),
    ]
    picked = pick_aarch64_wheel(files)
    assert picked is not None and picked.filename.endswith("cp311-cp311-manylinux_2_28_aarch64.whl")
    assert pick_aarch64_wheel(files[:3]).filename.startswith("torch-2.14.1-cp312")  # type: ignore[union-attr]
    assert pick_aarch64_wheel(files[:1]) is None


def _measured_arm64(*arches: str) -> WheelKernels:
    counts = {"torch/lib/libtorch_cuda.so": Counter({**dict.fromkeys(arches, 400), "sm_89": 1})}
    return WheelKernels(
        version="2.14.1",
        wheel=_wheel("torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl"),
        measured=measure(counts),
        libraries=tuple(counts),
        bytes_read=0,
    )


def _audit_edit(root: Path, kernels: WheelKernels) -> Finding | None:
    rel = "frameworks/torch.toml"
    data = toml.loads((root / rel).read_text())
    audit = ArchAudit(None, "https://pypi.org", rel, data, "2026-12-02")  # type: ignore[arg-type]
    variant = data["release"][0]["variant"][0]
    said = str((variant.get("arch_by_platform") or {}).get("linux/arm64", variant["arch"]))
    wheel = f"{kernels.wheel.url}#sha256={kernels.wheel.sha256}"
    return audit._platform_correction(
        variant,
        "torch 2.14.1 cu126 (linux/arm64)",
        [kernels],
        compare(said, kernels.measured),
        wheel,
        "linux/arm64",
    )


def _apply(root: Path, finding: Finding) -> None:
    assert finding.edit is not None
    path = root / "frameworks" / "torch.toml"
    path.write_text(apply_edit(path.read_text(), finding.edit, "frameworks/torch.toml"))


def test_audit_writes_the_aarch64_wheels_list_with_the_wheel_as_its_source(tmp_path: Path) -> None:
    root = _matrix(tmp_path, extra="")  # no per-platform list yet: arm64 reads `arch`
    kernels = _measured_arm64("sm_80", "sm_90")
    finding = _audit_edit(root, kernels)
    assert finding is not None and finding.action == "add"
    assert "linux/arm64 arch 5.0;6.0;7.0;7.5;8.0;8.6;9.0 -> 8.0;9.0" in finding.detail
    _apply(root, finding)
    matrix = load_matrix(root)
    assert check_matrix(matrix) == []
    variant = matrix.frameworks[0].releases[0].variants[0]
    wheel = f"{kernels.wheel.url}#sha256={kernels.wheel.sha256}"
    assert variant.arch_for("linux/arm64").describe() == "8.0;9.0"
    assert variant.arch_source_for("linux/arm64") == wheel  # measured: named as the wheel, as arch_source
    assert variant.arch_for("linux/amd64").describe() == "5.0;6.0;7.0;7.5;8.0;8.6;9.0"  # untouched
    assert _audit_edit(root, kernels) is None  # measured from this very wheel: nothing to propose


def test_audit_drops_an_entry_the_aarch64_wheel_shows_is_arch_itself(tmp_path: Path) -> None:
    root = _matrix(tmp_path)  # arm64 said 9.0
    finding = _audit_edit(
        root, _measured_arm64("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
    )
    assert finding is not None and "carries arch 5.0;6.0;7.0;7.5;8.0;8.6;9.0 itself" in finding.detail
    _apply(root, finding)
    text = (root / "frameworks" / "torch.toml").read_text()
    assert "arch_by_platform" not in text
    assert check_matrix(load_matrix(root)) == []
