"""The smoke program's progress lines (issue 32: a smoke step showed nothing until it ended): what the
programs write on stderr, how the runner shows them, and that a failed run's explanation is judged
without them."""

from __future__ import annotations

import pytest

from envbuild.errors import VerifyError
from envbuild.image.verify import PROGRESS_WIDTH, SmokeProgress, judge_output
from envbuild.smoke.programs import smoke_common
from envbuild.smoke.report import PROGRESS_PREFIX, without_progress


def test_the_program_writes_prefixed_lines_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    smoke_common.progress("importing torch")
    out, err = capsys.readouterr()
    assert out == "" and err == f"{PROGRESS_PREFIX}importing torch\n"


def test_training_steps_are_said_first_last_and_at_most_every_few_seconds(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(smoke_common, "PROGRESS_EVERY_S", 3600.0)  # nothing between first and last
    with smoke_common.TrainingClock({}, False) as clock:
        for step in range(1, 21):
            clock.step(step, 20, 1.0 / step)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["step 1/20", "step 20/20"]
    assert lines[-1].startswith(f"{PROGRESS_PREFIX}step 20/20: loss 0.05 (")


def test_a_failed_runs_explanation_is_its_own_lines_not_its_progress() -> None:
    stderr = (
        f"{PROGRESS_PREFIX}importing torch\nImportError: libcudart.so.12: cannot open\n{PROGRESS_PREFIX}x\n"
    )
    assert without_progress(stderr) == "ImportError: libcudart.so.12: cannot open\n"
    with pytest.raises(VerifyError) as raised:
        judge_output(
            "",
            stderr,
            1,
            device="cpu",
            seconds=1.0,
            image_id="x",
            platform=None,
            emulated=False,
            runtime="docker",
        )
    assert "libcudart.so.12" in raised.value.fix and PROGRESS_PREFIX not in raised.value.fix


def test_the_runner_shows_only_progress_lines_redacted_and_bounded() -> None:
    shown: list[str] = []
    progress = SmokeProgress.__new__(SmokeProgress)  # the line handling alone, without a container
    progress.say = shown.append
    progress._show("a line of the user's own output")
    progress._show(f"{PROGRESS_PREFIX}check: curl https://user:s3cr3t@example.com/x")
    progress._show(PROGRESS_PREFIX + "y" * 1000)
    assert len(shown) == 2 and "s3cr3t" not in shown[0] and shown[0].startswith("smoke: check: curl ")
    assert shown[1] == "smoke: " + "y" * PROGRESS_WIDTH
