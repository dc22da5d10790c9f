"""A team's decision not to judge a library (issue 32): `--skip-audit LIBRARY="REASON"` and `[audit]
skip` in envbuild.toml. The library that cannot be read is a real one for NVIDIA's cuobjdump: this
Python's ELF binary with a `.nv_fatbin` section that is no fatbin (tests/helpers/audit.with_fatbin),
on which cuobjdump 13 stops before listing any entry ("Invalid fatbin header"), as it does on the
real cuBLAS 11 and cuSPARSE 11 libraries (matrix/README.md); the captured cuBLAS 12.4 run replays a
partly read one.

The rules: the reason is required and checked; a skipped library is listed but not judged, never
fails the audit or the gate, and the skip goes into the report, the gate's record and the SBOM; a
skip naming a library the artifact lacks is a warning; the error for a deciding library that cannot
be read prints the flag to use, filled in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.attest import fields
from envbuild.attest.record import BuildRecord
from envbuild.attest.sbom import build_sbom, sbom_json, validate_sbom
from envbuild.audit.kernels import Kernels, read_kernels
from envbuild.audit.report import to_document, to_text
from envbuild.audit.skip import FLAG, SPEC, AuditSkip, merge, parse_flag, parse_flags
from envbuild.audit.tree import judge_tree
from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.image.auditgate import judge_audit
from envbuild.image.inventory import parse_inventory
from envbuild.matrix.load import load_matrix
from envbuild.resolve.query import parse_gpu
from envbuild.spec.model import parse_spec
from tests.helpers.audit import plain_elf, replaying_cuobjdump, with_fatbin
from tests.helpers.paths import FIXTURES

TORCH_CUDA = "site-packages/torch/lib/libtorch_cuda.so"
CUBLAS = "site-packages/nvidia/cublas/lib/libcublas.so.12"
CAPTURED = FIXTURES / "audit" / "nvidia_cublas_cu12-12.4.5.8-libcublas.so.12"
REASON = "cuobjdump 13.5 cannot read it, envbuild issue #41"
SKIP = AuditSkip(library="libtorch_cuda.so", reason=REASON, source=FLAG)
HOPPER = Kernels(sass=("sm_80", "sm_90"), ptx=("compute_90",))
RECORD = json.loads((FIXTURES / "attest" / "record.json").read_text(encoding="utf-8"))  # a real build's
CAPTURE = (FIXTURES / "attest" / "inventory-torch.txt").read_text(encoding="utf-8")
INVENTORY = parse_inventory(CAPTURE, CAPTURE.split("\n", 1)[0].rsplit(" ", 1)[0], {})


@pytest.fixture(scope="module")
def h100():
    return (parse_gpu("H100", load_matrix()),)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """An unpacked torch whose libtorch_cuda.so cuobjdump cannot read, beside a CPU library."""
    root = tmp_path / "tree"
    base = plain_elf(tmp_path / "plain")
    with_fatbin(base, root / "torch" / "lib" / "libtorch_cuda.so", b"no fatbin here " * 64)
    plain_elf(root / "torch" / "lib" / "libc10.so")
    return root


@pytest.fixture
def unread(tree: Path) -> Kernels:
    return read_kernels(str(tree / "torch" / "lib" / "libtorch_cuda.so"))


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- the flag and the table ---------------------------------------------------------------------


def test_the_flag_takes_a_file_name_and_a_reason() -> None:
    assert parse_flag(f"libtorch_cuda.so={REASON}") == SKIP
    assert parse_flag("libcublas.so.12= spaces around are dropped ").reason == "spaces around are dropped"
    assert parse_flag("_linalg.so=the JAX plugin's").library == "_linalg.so"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("libtorch_cuda.so", "has no reason"),
        ("libtorch_cuda.so=", "has no reason"),
        ("libtorch_cuda.so=   ", "has no reason"),
        ("torch/lib/libtorch_cuda.so=why", "is a path"),
        ("libtorch_cuda=why", "is not a shared object's file name"),
        ("libtorch_cuda.so.py=why", "is not a shared object's file name"),
        ("=why", "is not a shared object's file name"),
        ("libtorch_cuda.so=line one\nline two", "control or invisible character (U+000A)"),
        ("libtorch_cuda.so=hidden\u202etext", "control or invisible character (U+202E)"),
        ("libtorch_cuda.so=" + "x" * 301, "a reason of 301 characters; at most 300"),
    ],
)
def test_a_bad_flag_is_a_usage_error_naming_it_and_the_form(text: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_flag(text)
    assert caught.value.message.startswith(f"{FLAG} ") and said in caught.value.message
    assert 'LIBRARY="REASON"' in caught.value.fix


def test_a_library_named_twice_is_refused_and_a_flag_replaces_the_specs_reason() -> None:
    with pytest.raises(UsageError, match=r"names libtorch_cuda\.so twice"):
        parse_flags(["libtorch_cuda.so=a", "libtorch_cuda.so=b"])
    spec = (
        AuditSkip(library="libtorch_cuda.so", reason="old", source=SPEC),
        AuditSkip(library="libnccl.so.2", reason="kept", source=SPEC),
    )
    merged = merge(spec, parse_flags([f"libtorch_cuda.so={REASON}"]))
    assert merged == (SKIP, spec[1])


def _spec(tmp_path: Path, audit: str):
    text = f'[stack]\ndriver = "550"\nframework = "torch"\n\n{audit}'
    path = tmp_path / "envbuild.toml"
    path.write_text(text)
    from envbuild._util import toml

    return parse_spec(toml.loads(text), str(path), "0" * 64, text)


def test_the_spec_commits_the_decision(tmp_path: Path) -> None:
    spec = _spec(tmp_path, f'[audit]\nskip = [{{library = "libtorch_cuda.so", reason = "{REASON}"}}]\n')
    assert spec.audit_skip == (SKIP.replace(source=SPEC),)
    assert _spec(tmp_path, "").audit_skip == ()


@pytest.mark.parametrize(
    ("audit", "said"),
    [
        (
            '[audit]\nskip = "libtorch_cuda.so"\n',
            "[audit] skip = 'libtorch_cuda.so': expected a list of tables",
        ),
        ('[audit]\nskip = [{library = "libtorch_cuda.so"}]\n', "skip[0].reason = None: is missing"),
        (
            '[audit]\nskip = [{library = "lib/x.so", reason = "r"}]\n',
            "skip[0].library = 'lib/x.so': is a path",
        ),
        ('[audit]\nskip = [{library = "x.so", reason = ""}]\n', "skip[0].reason = '': has no reason"),
        ('[audit]\nskip = [{library = "x.so", reason = "r", why = "w"}]\n', "has an unknown key 'why'"),
        (
            '[audit]\nskip = [{library = "x.so", reason = "r"}, {library = "x.so", reason = "s"}]\n',
            "skip[1].library = 'x.so': is skipped twice",
        ),
        ("[audit]\nskipped = []\n", "[audit] has an unknown key 'skipped'"),
    ],
)
def test_a_bad_audit_table_names_the_file_and_the_key(tmp_path: Path, audit: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        _spec(tmp_path, audit)
    assert said in caught.value.message and str(tmp_path / "envbuild.toml") in caught.value.message
    assert caught.value.fix


# --- judging ------------------------------------------------------------------------------------


def test_a_deciding_library_cuobjdump_cannot_read_fails_and_the_fix_is_the_flag_filled_in(
    unread: Kernels, h100
) -> None:
    assert unread.not_read and unread.unread and "Invalid fatbin header" in unread.unread
    audit = judge_tree({TORCH_CUDA: unread}, h100, target="image", framework="torch")
    assert not audit.ok
    gate = judge_audit(audit, "default")
    assert gate.error is not None
    assert TORCH_CUDA in gate.error.message and unread.unread.split(" stopped")[0] in gate.error.message
    assert '--skip-audit libtorch_cuda.so="REASON"' in gate.error.fix
    assert "[audit] skip" in gate.error.fix and "report it to envbuild" in gate.error.fix
    assert '--skip-audit libtorch_cuda.so="REASON"' in to_text(audit)


def test_a_skipped_library_is_listed_not_judged_and_recorded(unread: Kernels, h100) -> None:
    audit = judge_tree(
        {TORCH_CUDA: unread, CUBLAS: HOPPER}, h100, target="image", framework="torch", skip=(SKIP,)
    )
    assert audit.ok and audit.unreadable == [] and audit.failures == []
    (torch,) = audit.skipped
    assert torch.path == TORCH_CUDA and torch.skipped == SKIP and torch.verdicts == ()
    document = to_document(audit)
    assert document["skipped"] == [
        {"library": "libtorch_cuda.so", "reason": REASON, "source": FLAG, "paths": [TORCH_CUDA]}
    ]
    assert document["warnings"] == [] and document["runs"] == {"H100": True}
    entry = next(lib for lib in document["libraries"] if lib["path"] == TORCH_CUDA)
    assert entry["skipped"] == REASON and entry["verdicts"] == {} and entry["read"] == "not read"
    text = to_text(audit)
    assert f"  not judged, skipped (--skip-audit): {REASON}" in text
    assert f"skipped (--skip-audit): libtorch_cuda.so, not judged: {REASON}" in text
    assert "error:" not in text
    gate = judge_audit(audit, "default")
    assert gate.error is None and gate.document["ok"] is True
    assert gate.document["skipped"] == document["skipped"]
    assert gate.document["gpus"]["sm_90"]["verdict"] is None and gate.labels == {}  # nothing was judged
    assert f"{TORCH_CUDA}: not judged, skipped by --skip-audit: {REASON}" in gate.warnings()
    assert not any("no device code" in w for w in gate.warnings())


def test_a_skipped_library_that_could_be_read_has_no_verdict_either(h100) -> None:
    """The skip is what the team asked: even a readable library is not judged, and the others are."""
    audit = judge_tree(
        {TORCH_CUDA: Kernels(sass=("sm_50",), ptx=()), "torch/lib/libtorch_cuda_linalg.so": HOPPER},
        h100,
        target="image",
        framework="torch",
        skip=(SKIP,),
    )
    assert audit.ok and audit.failures == []  # sm_50 only would fail an H100
    gate = judge_audit(audit, "default")
    assert gate.labels == {"io.envbuild.audit.sm_90": "native"}


def test_a_skip_of_a_library_the_artifact_lacks_is_a_warning(h100) -> None:
    missing = AuditSkip(library="libgone.so.1", reason="stale", source=SPEC)
    audit = judge_tree({TORCH_CUDA: HOPPER}, h100, target="image", framework="torch", skip=(missing,))
    assert audit.ok and audit.skips_unmatched == [missing]
    assert to_document(audit)["warnings"] == ["envbuild.toml libgone.so.1: image has no library of that name"]
    assert "warning: envbuild.toml libgone.so.1: image has no library of that name" in to_text(audit)
    gate = judge_audit(audit, "default")
    assert gate.error is None and gate.labels == {"io.envbuild.audit.sm_90": "native"}
    assert "envbuild.toml libgone.so.1: the image has no library of that name, so nothing was skipped" in (
        gate.warnings()
    )
    assert gate.document["skipped"][0]["paths"] == []


def test_a_partly_read_library_can_be_skipped_too(tmp_path: Path, h100) -> None:
    binary = replaying_cuobjdump(
        tmp_path, CAPTURED.with_suffix(".run.json"), CAPTURED.with_suffix(".list-elf-ptx.txt")
    )
    partly = read_kernels(str(plain_elf(tmp_path / "libcublas.so.12")), binary)
    skip = AuditSkip(library="libcublas.so.12", reason="judged by the matrix", source=FLAG)
    audit = judge_tree({CUBLAS: partly}, h100, target="cublas.whl", skip=(skip,))
    assert audit.libraries[0].counts and audit.libraries[0].verdicts == ()
    gate = judge_audit(audit, "cublas")
    assert [w for w in gate.warnings() if "partly read" in w] == []  # not judged, so not warned as judged


# --- the SBOM -----------------------------------------------------------------------------------


def test_the_sbom_carries_each_applied_skip_and_leaves_the_library_out_of_the_measured_kernels(
    unread: Kernels, h100
) -> None:
    other = AuditSkip(library="libnccl.so.2", reason="not in this image", source=SPEC)
    audit = judge_tree(
        {TORCH_CUDA: unread, "torch/lib/libtorch_cuda_linalg.so": HOPPER},
        h100,
        target="image",
        framework="torch",
        skip=(SKIP, other),
    )
    record = json.loads(json.dumps(RECORD))
    record["audit"] = judge_audit(audit, "default").document
    sbom = build_sbom(
        BuildRecord.from_json(record),
        INVENTORY,
        subject=("127.0.0.1:5000/envbuild-test/x", "sha256:" + "ab" * 32),
    )
    validate_sbom(sbom_json(sbom))  # CycloneDX 1.6: a property name may repeat
    assert fields.sbom_properties(sbom, fields.P_AUDIT_SKIPPED) == [
        f"libtorch_cuda.so: {REASON} (--skip-audit)"
    ]
    assert fields.sbom_property(sbom, fields.P_AUDIT_SASS) == "sm_80,sm_90"  # the judged library's only
    assert fields.sbom_property(sbom, fields.P_AUDIT_VERDICTS) == "sm_90=native"


def test_an_sbom_without_skips_says_nothing_of_them() -> None:
    sbom = build_sbom(
        BuildRecord.from_json(RECORD),
        INVENTORY,
        subject=("127.0.0.1:5000/envbuild-test/x", "sha256:" + "ab" * 32),
    )
    assert fields.sbom_properties(sbom, fields.P_AUDIT_SKIPPED) == []


# --- the command line ---------------------------------------------------------------------------


def test_audit_exits_1_on_the_unreadable_library_and_0_with_the_skip(
    capsys: pytest.CaptureFixture[str], tree: Path
) -> None:
    code, out, _ = run_cli(capsys, "audit", str(tree), "--gpu", "H100")
    assert code == 1
    assert "error: torch/lib/libtorch_cuda.so: not read (cuobjdump " in out
    assert '--skip-audit libtorch_cuda.so="REASON"' in out
    code, out, err = run_cli(
        capsys,
        "audit",
        str(tree),
        "--gpu",
        "H100",
        "--json",
        "--skip-audit",
        f"libtorch_cuda.so={REASON}",
        "--skip-audit",
        "libgone.so=stale",
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["ok"] is True and document["unreadable"] == []
    assert document["skipped"][0] == {
        "library": "libtorch_cuda.so",
        "reason": REASON,
        "source": FLAG,
        "paths": ["torch/lib/libtorch_cuda.so"],
    }
    assert document["warnings"] == [f"--skip-audit libgone.so: {tree} has no library of that name"]


def test_audit_takes_the_specs_skip_with_its_gpus(
    capsys: pytest.CaptureFixture[str], tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "envbuild.toml").write_text(
        '[stack]\ndriver = "550"\nframework = "torch"\ngpus = ["H100"]\n\n'
        f'[audit]\nskip = [{{library = "libtorch_cuda.so", reason = "{REASON}"}}]\n'
    )
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "audit", str(tree), "--json")
    assert code == 0, err
    assert json.loads(out)["skipped"][0]["source"] == SPEC


@pytest.mark.parametrize("command", [["build"], ["audit", "x.so"], ["verify", "img", "--gpu", "H100"]])
def test_a_bad_skip_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str], command) -> None:
    code, _, err = run_cli(capsys, *command, "--skip-audit", "torch/lib/libtorch_cuda.so=why")
    assert code == 2 and "--skip-audit 'torch/lib/libtorch_cuda.so=why' is a path" in err
    assert "Traceback" not in err


def test_verify_skip_without_a_gpu_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "verify", "img", "--skip-audit", f"libtorch_cuda.so={REASON}")
    assert code == 2 and "without --gpu" in err
