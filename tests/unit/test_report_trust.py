"""Report files as untrusted input (issue 14, item 2): `trusted_report` is the one check every promotion
from a file goes through. The reports are real ones, captured from `envbuild smoke --json` with torch on
the CPU (tests/fixtures/smoke/SOURCES.md); each forgery keeps or recomputes the digest as an attacker
with the file, or with envbuild's code, would."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from envbuild.errors import EXIT_FAILURE, EXIT_USAGE, PromoteError, UsageError
from envbuild.image.promote import labels_for, promote
from envbuild.image.trust import TrustedReport, trusted_report
from envbuild.image.verify import report_digest, report_document
from envbuild.smoke.report import gate_problems, load_schema, validate
from tests.helpers.paths import FIXTURES

IMAGE = "sha256:" + "3" * 64
OTHER = "sha256:" + "4" * 64


def captured(name: str) -> dict:
    return json.loads((FIXTURES / "smoke" / name).read_text())


PASSED = captured("torch-cpu-passed.json")
FAILED = captured("torch-cpu-lr0-failed.json")  # ENVBUILD_SMOKE_LR=0: the loss cannot decrease


def write(
    path: Path, report: dict, *, image: str = IMAGE, device: str = "cpu", digest: str | None = None
) -> str:
    """A report file as `envbuild verify --report` writes it; digest=None recomputes the digest."""
    document = report_document(image, device, report)
    path.write_text(json.dumps({**document, "report-digest": digest or report_digest(document)}))
    return str(path)


def refusal(path: str, image_id: str = IMAGE) -> PromoteError:
    with pytest.raises(PromoteError) as caught:
        trusted_report(path, image_id)
    error = caught.value
    assert error.exit_code == EXIT_FAILURE
    assert error.message.startswith(f"--report {path} ") and error.message.endswith(": refusing to promote")
    assert error.fix and "envbuild verify" in error.fix
    return error


def test_the_captured_reports_are_what_the_schema_describes() -> None:
    for report in (PASSED, FAILED):
        jsonschema.validate(report, load_schema())
        assert validate(report) == []
    assert gate_problems(PASSED, "cpu") == []


def test_a_report_verify_wrote_is_trusted_for_its_image(tmp_path: Path) -> None:
    path = write(tmp_path / "smoke.json", PASSED)
    trusted = trusted_report(path, IMAGE)
    assert isinstance(trusted, TrustedReport)
    assert (trusted.image_id, trusted.device, trusted.report) == (IMAGE, "cpu", PASSED)
    saved = json.loads(Path(path).read_text())
    assert trusted.digest == saved["report-digest"]
    # the promoted image's label carries the same digest as the file (and record.json)
    assert labels_for(IMAGE, PASSED, "cpu")["io.envbuild.smoke.report-digest"] == trusted.digest


def test_the_issues_self_asserted_report_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "forged.json"
    path.write_text(json.dumps({"image": IMAGE, "device": "gpu", "report": {"passed": True}}))
    error = refusal(str(path))
    assert "has no report-digest" in error.message


def test_a_failing_report_edited_to_pass_is_refused_by_its_digest(tmp_path: Path) -> None:
    edited = copy.deepcopy(FAILED)
    edited.update(passed=True, failed=[], gates={**edited["gates"], "training": "passed"})
    kept = report_digest(report_document(IMAGE, "cpu", FAILED))  # the digest verify wrote
    error = refusal(write(tmp_path / "smoke.json", edited, digest=kept))
    assert "does not match its report-digest: it was edited after `envbuild verify` wrote it" in error.message


def test_with_the_digest_recomputed_the_gates_still_refuse(tmp_path: Path) -> None:
    edited = copy.deepcopy(FAILED)
    edited.update(passed=True, failed=[], gates={**edited["gates"], "training": "passed"})
    error = refusal(write(tmp_path / "smoke.json", edited))
    assert "does not show a passing smoke step" in error.message
    assert "report.losses: loss did not decrease: first 1.06659, after 5 step(s) 1.06659" in error.message


def test_a_cpu_report_relabelled_gpu_is_refused(tmp_path: Path) -> None:
    error = refusal(write(tmp_path / "smoke.json", PASSED, device="gpu"))
    assert "report.device_requested: 'cpu', not 'gpu'" in error.message
    assert "a GPU smoke step uses a GPU" in error.message


def test_a_report_for_another_image_is_refused(tmp_path: Path) -> None:
    error = refusal(write(tmp_path / "smoke.json", PASSED, image=OTHER))
    assert f"was made for {OTHER[:19]}, not for {IMAGE[:19]}" in error.message


def mutated(change: str) -> dict:
    report = copy.deepcopy(PASSED)
    if change == "no gates":
        del report["gates"]
    elif change == "a gate failed":
        report["gates"]["placement"] = "failed"
    elif change == "a gate not run":
        report["gates"]["training"] = "skipped: not reached"
    elif change == "a nan loss":
        report["losses"][3] = "nan"
    elif change == "an infinite last loss":
        report["loss_last"] = "inf"
    elif change == "fewer losses than steps":
        report["losses"] = report["losses"][:3]
    elif change == "more steps than losses":
        report["steps"] = 40
    elif change == "loss went up":
        report["loss_last"] = report["losses"][0] + 1
    elif change == "loss_decreased false":
        report["loss_decreased"] = False
    elif change == "no precision":
        report["precision"] = None
    elif change == "zero steps":
        report["steps"] = 0
    elif change == "passed without failed list":
        del report["failed"]
    elif change == "a stray failure":
        report["failed"] = [{"gate": "memory", "detail": "x", "hint": "y"}]
    return report


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("no gates", "report: missing 'gates'"),
        ("a gate failed", "report.gates.placement: failed, but no entry in failed names it"),
        ("a gate not run", "report.gates.training: 'skipped: not reached'; a passing smoke step passes it"),
        ("a nan loss", "report.losses: loss is not finite at step 4 ('nan')"),
        ("an infinite last loss", "report.losses: loss is not finite after the last update ('inf')"),
        ("fewer losses than steps", "report.losses: 3 loss(es) for 20 step(s)"),
        ("more steps than losses", "report.losses: 20 loss(es) for 40 step(s)"),
        ("loss went up", "report.losses: loss did not decrease"),
        ("loss_decreased false", "report.loss_decreased: False"),
        ("no precision", "report.precision: None is not one of fp32, fp16, bf16"),
        ("zero steps", "report.steps: 0 is below 1"),
        ("passed without failed list", "report: missing 'failed'"),
        ("a stray failure", "report: passed must be true exactly when failed is empty"),
    ],
)
def test_every_gate_is_judged_again_from_the_report(tmp_path: Path, change: str, named: str) -> None:
    report = mutated(change)
    error = refusal(write(tmp_path / "smoke.json", report))  # the digest recomputed: only the gates stop it
    assert "does not show a passing smoke step: " in error.message
    assert named in error.message


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("not json", "is not JSON"),
        ("[]", "is not a JSON object"),
        (
            json.dumps({"image": IMAGE, "device": "cpu", "report": PASSED, "report-digest": "x", "k": 1}),
            "has k",
        ),
        (
            json.dumps({"image": "abc", "device": "cpu", "report": {}, "report-digest": "x"}),
            "names no image id",
        ),
        (json.dumps({"image": IMAGE, "device": "tpu", "report": {}, "report-digest": "x"}), "names device"),
        (
            json.dumps({"image": IMAGE, "device": "cpu", "report": [], "report-digest": "x"}),
            "no report object",
        ),
    ],
)
def test_malformed_files_are_refused_with_what_is_wrong(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "smoke.json"
    path.write_text(content)
    assert why in refusal(str(path)).message


def test_an_unreadable_path_is_a_usage_error(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.json", tmp_path):
        with pytest.raises(UsageError) as caught:
            trusted_report(str(path), IMAGE)
        assert caught.value.exit_code == EXIT_USAGE and str(path) in caught.value.message


def test_promote_judges_an_in_memory_report_with_the_same_gates() -> None:
    """The build pipeline hands promote() its report directly: the gates apply there too."""
    edited = copy.deepcopy(FAILED)
    edited.update(passed=True, failed=[], gates={**edited["gates"], "training": "passed"})
    with pytest.raises(
        PromoteError, match=r"only images whose smoke step passed are promoted: report\.losses"
    ):
        promote(IMAGE, tags=["x/y:z"], report=edited, device="cpu")
