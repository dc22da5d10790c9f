"""Issue 19 items 1, 2 and 5: which platforms each build, image and GPU row publishes for, and
`resolve --platform` built on them. Expected values are the cited rows (PyPI file lists, pytorch/
test-infra's release matrix, NVIDIA's container-images dist/ and product pages)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.matrix.check import check_matrix
from envbuild.matrix.load import load_matrix
from envbuild.matrix.model import Matrix, find_gpu
from envbuild.resolve.platform_choice import target_platforms
from envbuild.resolve.query import build_query
from envbuild.resolve.report import install_hint
from envbuild.resolve.solver import resolve
from envbuild.spec.model import load_spec

MATRIX = Path(__file__).resolve().parents[2] / "matrix"
BOTH = ("linux/amd64", "linux/arm64")
AMD64 = ("linux/amd64",)


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(MATRIX)


def platforms_of(matrix: Matrix, framework: str, version: str, variant: str) -> tuple[str, ...]:
    fw = matrix.framework(framework)
    assert fw is not None
    release = next(r for r in fw.releases if r.version == version)
    return next(v for v in release.variants if v.name == variant).platforms


@pytest.mark.parametrize(
    ("framework", "version", "variant", "expected"),
    [
        # PyPI's aarch64 torch wheel is CPU-only up to 2.10: the PyPI CUDA build is amd64 only
        ("torch", "2.9.1", "cu128", AMD64),
        ("torch", "2.10.0", "cu128", AMD64),
        # from 2.11 the PyPI aarch64 wheel is a CUDA 13.0 build
        ("torch", "2.11.0", "cu130", BOTH),
        ("torch", "2.14.1", "cu130", BOTH),
        # 2.15.0's PyPI aarch64 wheel is a CUDA 13.2 build (its METADATA, read by HTTP range)
        ("torch", "2.15.0", "cu132", BOTH),
        # test-infra CUDA_AARCH64_ARCHES: 2.7 12.8-aarch64, 2.8 12.9-aarch64; nothing else claimed
        ("torch", "2.7.1", "cu128", BOTH),
        ("torch", "2.7.1", "cu126", AMD64),
        ("torch", "2.8.0", "cu129", BOTH),
        ("torch", "2.8.0", "cu128", AMD64),
        # download.pytorch.org sbsa builds (test-infra CUDA_AARCH64_ARCHES, RELEASE.md's aarch64 table)
        ("torch", "2.9.1", "cu126", BOTH),
        ("torch", "2.10.0", "cu130", BOTH),
        ("torch", "2.11.0", "cu128", BOTH),
        ("torch", "2.12.1", "cu126", BOTH),
        ("torch", "2.14.1", "cu132", BOTH),
        # jax-cuda12-plugin/pjrt aarch64 wheels: 0.4.27 yes, 0.4.26 and 0.4.38 no; cuda13 from 0.7.2
        ("jax", "0.4.26", "cuda12", AMD64),
        ("jax", "0.4.27", "cuda12", BOTH),
        ("jax", "0.4.38", "cuda12", AMD64),
        ("jax", "0.5.0", "cuda12", BOTH),
        ("jax", "0.10.2", "cuda12", BOTH),
        ("jax", "0.10.2", "cuda13", BOTH),
        ("jax", "0.4.25", "cuda12", AMD64),  # the find-links builds: arm64 not claimed
    ],
)
def test_variant_platforms_follow_the_cited_rows(
    matrix: Matrix, framework: str, version: str, variant: str, expected: tuple[str, ...]
) -> None:
    assert platforms_of(matrix, framework, version, variant) == expected


def test_tensorflow_never_publishes_an_arm64_cuda_build(matrix: Matrix) -> None:
    tf = matrix.framework("tensorflow")
    assert tf is not None
    assert {v.platforms for r in tf.releases for v in r.variants} == {AMD64}


def test_every_arm64_claim_names_its_source(matrix: Matrix) -> None:
    claims = [
        v for fw in matrix.frameworks for r in fw.releases for v in r.variants if "linux/arm64" in v.platforms
    ]
    assert claims and all(v.platforms_source and v.platforms_source.startswith("https://") for v in claims)


@pytest.mark.parametrize("name", ["GH200", "GB200", "GB300", "GB10"])
def test_grace_gpus_come_only_in_arm64_hosts(matrix: Matrix, name: str) -> None:
    gpu = find_gpu(matrix, name)
    assert gpu is not None and gpu.host_platforms == ("linux/arm64",) and not gpu.integrated


@pytest.mark.parametrize("name", ["H100", "B200", "RTX 4090"])
def test_other_gpus_fit_any_host(matrix: Matrix, name: str) -> None:
    gpu = find_gpu(matrix, name)
    assert gpu is not None and gpu.host_platforms == ()


@pytest.mark.parametrize("name", ["Jetson AGX Orin", "Jetson Orin NX", "Jetson Orin Nano", "Jetson Thor"])
def test_jetson_is_integrated_and_refused_naming_jetpack(matrix: Matrix, name: str) -> None:
    with pytest.raises(UsageError) as caught:
        build_query(matrix, driver="580", gpus=[name])
    assert "integrated (Jetson/Tegra)" in caught.value.message
    assert (
        "JetPack 7" in (caught.value.fix or "")
        if name == "Jetson Thor"
        else "JetPack 6" in (caught.value.fix or "")
    )


def test_ubuntu_image_rows_from_12_4_1_publish_arm64(matrix: Matrix) -> None:
    rows = {i.cuda: i.platforms for i in matrix.images}
    assert rows[(12, 8, 1)] == BOTH and rows[(13, 0, 2)] == BOTH
    assert rows[(11, 0, 3)] == AMD64  # not in the snapshot read: not claimed


def test_gb200_resolves_arm64_stacks_only(matrix: Matrix) -> None:
    query = build_query(matrix, driver="580", gpus=["GB200"])
    assert query.platform == "linux/arm64"
    result = resolve(matrix, query)
    assert result.stacks and all("linux/arm64" in s.variant.platforms for s in result.stacks)


def test_a_pypi_build_is_installed_from_pypi_in_the_hint(matrix: Matrix) -> None:
    """The arm64 fact is PyPI's (torch 2.11+ aarch64 wheels); the hint must not send a Grace user to
    download.pytorch.org, whose sbsa builds of that release were not read. Another variant keeps its
    own index."""
    result = resolve(matrix, build_query(matrix, driver="580", gpus=["GB200"], frameworks=["torch==2.14.1"]))
    pypi = next(s for s in result.stacks if s.variant.name == s.release.pypi_variant)
    assert install_hint(pypi) == "pip install 'torch==2.14.1'"
    amd64 = resolve(matrix, build_query(matrix, driver="580", frameworks=["torch==2.14.1"]))
    other = next(s for s in amd64.stacks if s.variant.name != s.release.pypi_variant)
    assert install_hint(other).endswith(f"--index-url https://download.pytorch.org/whl/{other.variant.name}")


def test_gb200_with_amd64_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "--driver", "580", "--gpu", "GB200", "--platform", "linux/amd64"]) == 2
    err = capsys.readouterr().err
    assert "GB200 comes only in linux/arm64 hosts" in err and "Grace" in err


def test_bad_platform_names_the_accepted_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "--driver", "580", "--platform", "sparc"]) == 2
    assert "linux/amd64, linux/arm64" in capsys.readouterr().err


def test_arm64_rejects_amd64_only_builds_with_their_reason(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["resolve", "--driver", "580", "--platform", "aarch64", "--framework", "torch==2.6.0", "--json"]
    )
    document = json.loads(capsys.readouterr().out)
    # the matrix marks no 2.6 build linux/arm64 (no source read lists one)
    assert code == 3 and document["platform"] == "linux/arm64"
    reasons = {r["candidate"]: r for r in document["rejected"]}
    assert reasons["torch 2.6.0+cu124"]["kind"] == "platform"
    assert "no linux/arm64 build" in reasons["torch 2.6.0+cu124"]["reason"]


def test_text_shows_the_platform_in_header_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "--driver", "580", "--gpu", "GH200", "--framework", "jax", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "platform linux/arm64" in out.splitlines()[0]
    assert out.count("linux/arm64") >= 2


def test_default_platform_is_amd64_without_a_grace_gpu(matrix: Matrix) -> None:
    assert build_query(matrix, driver="580", gpus=["H100"]).platform == "linux/amd64"


def _copy_matrix(tmp_path: Path) -> Path:
    root = tmp_path / "matrix"
    shutil.copytree(MATRIX, root)
    return root


def test_gpus_that_need_different_platforms_are_a_usage_error(tmp_path: Path) -> None:
    root = _copy_matrix(tmp_path)
    gpus = root / "gpus.toml"
    text = gpus.read_text().replace(
        'name = "RTX 4090"\n', 'name = "RTX 4090"\nhost_platforms = ["linux/amd64"]\n', 1
    )
    gpus.write_text(text)
    matrix = load_matrix(root)
    with pytest.raises(UsageError) as caught:
        build_query(matrix, driver="580", gpus=["GB200", "RTX 4090"])
    assert "need different host platforms" in caught.value.message


def test_matrix_check_requires_platforms(tmp_path: Path) -> None:
    root = _copy_matrix(tmp_path)
    tf = root / "frameworks" / "tensorflow.toml"
    tf.write_text(tf.read_text().replace('platforms = ["linux/amd64"]\n', "", 1))
    problems = check_matrix(load_matrix(root))
    assert any("no platforms" in p and "tensorflow" in p for p in problems)


def test_matrix_check_requires_a_source_for_an_arm64_claim(tmp_path: Path) -> None:
    root = _copy_matrix(tmp_path)
    tf = root / "frameworks" / "tensorflow.toml"
    text = tf.read_text().replace(
        'platforms = ["linux/amd64"]\nplatforms_source = "https://www.tensorflow.org/install/pip"\n',
        'platforms = ["linux/amd64", "linux/arm64"]\n',
        1,
    )
    tf.write_text(text)
    assert any("without platforms_source" in p for p in check_matrix(load_matrix(root)))


def test_matrix_check_flags_an_integrated_gpu_without_what_to_use(tmp_path: Path) -> None:
    root = _copy_matrix(tmp_path)
    gpus = root / "gpus.toml"
    text = gpus.read_text()
    start = text.index('name = "Jetson Thor"')
    line = text.index("integrated_stack = ", start)
    gpus.write_text(text[:line] + text[text.index("\n", line) + 1 :])
    assert any(
        "Jetson Thor: integrated without integrated_stack" in p for p in check_matrix(load_matrix(root))
    )


def test_a_spec_target_with_a_grace_gpu_is_for_arm64(tmp_path: Path, matrix: Matrix) -> None:
    spec_file = tmp_path / "envbuild.toml"
    spec_file.write_text('[stack]\nframework = "jax==0.10.2"\ndriver = "580"\ngpus = ["GB200"]\n')
    spec = load_spec(str(spec_file))
    (target,) = spec.target(None)
    assert target_platforms(matrix, target.stack) == ("linux/arm64",)
