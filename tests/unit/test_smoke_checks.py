"""The user's own checks in the smoke step (issue 32, item 6): `[smoke] imports` and `[smoke] command`.

Their rules where the spec reads them and where a flag takes them, how they reach the image (a file
beside the smoke program, written by render) and the program's command line, and how verify judges a
report that ran them: real reports the program printed (tests/fixtures/smoke/SOURCES.md), judged by
image.verify.judge_output, the function every runtime's output goes through. The program running them
for real is tests/integration/test_smoke.py.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError, VerifyError
from envbuild.image.verify import asked_checks, judge_output
from envbuild.smoke import CHECKS_FILE, MAX_IMPORTS, checks_file, smoke_command
from envbuild.smoke.programs import smoke_common as common
from envbuild.smoke.report import gate_problems, load_schema, validate
from envbuild.spec.model import load_spec
from tests.helpers.paths import FIXTURES

PASSED = json.loads((FIXTURES / "smoke" / "torch-cpu-checks-passed.json").read_text())
FAILED = json.loads((FIXTURES / "smoke" / "torch-cpu-checks-failed.json").read_text())
OLD = json.loads((FIXTURES / "smoke" / "torch-cpu-passed.json").read_text())  # before checks existed

SPEC = """
[stack]
driver = "550"
framework = "torch==2.5.1"
gpus = ["H100"]
os = "ubuntu22.04"

[smoke]
"""


def write(tmp_path: Path, smoke_lines: str) -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(SPEC + smoke_lines, encoding="utf-8")
    return path


# --- the spec --------------------------------------------------------------------------------------


def test_imports_and_command_are_read_as_written(tmp_path: Path) -> None:
    spec = load_spec(
        str(
            write(
                tmp_path,
                'imports = ["transformers", "datasets", "myproject.selftest"]\n'
                "command = \"bash -c 'pytest -q tests/gpu && echo ok'\"\n",
            )
        )
    )
    assert spec.smoke.imports == ("transformers", "datasets", "myproject.selftest")
    assert spec.smoke.command == "bash -c 'pytest -q tests/gpu && echo ok'"


def test_no_checks_by_default(tmp_path: Path) -> None:
    spec = load_spec(str(write(tmp_path, "")))
    assert spec.smoke.imports == () and spec.smoke.command is None


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('imports = ["scikit-learn"]', "a pip name?"),
        ('imports = ["a..b"]', "not a Python module name"),
        ('imports = ["import"]', "'import' is a keyword"),
        ('imports = ["numpy\\nRUN id"]', "newline"),
        ('imports = ["numpy; id"]', "not a Python module name"),
        ('imports = ["tränsformers"]', "ASCII"),
        ("imports = [1]", "each item quoted"),
        ('imports = "transformers"', "expected a list of strings"),
        ('imports = ["six", "six"]', "names 'six' twice"),
        (f"imports = [{', '.join(repr(f'm{n}') for n in range(MAX_IMPORTS + 1))}]", "at most 64"),
    ],
)
def test_bad_imports_name_the_key_and_say_what_to_write(tmp_path: Path, line: str, needle: str) -> None:
    path = write(tmp_path, line.replace("'", '"') if line.startswith("imports = [") else line)
    with pytest.raises(UsageError) as raised:
        load_spec(str(path))
    rendered = raised.value.render()
    assert "[smoke] imports" in rendered and str(path) in rendered
    assert needle in rendered
    assert raised.value.fix


@pytest.mark.parametrize(
    ("command", "needle"),
    [
        ("python -m selftest && echo ok", "'&&' outside quotes"),
        ("python -m selftest | tee log", "'|' outside quotes"),
        ("python -m selftest > log", "'>' outside quotes"),
        ("python -m selftest; id", "';' outside quotes"),
        ("echo $HOME", "'$' outside quotes"),
        ('python -c \\"print($HOME)\\"', "'$' inside double quotes"),
        ("python `id`", "'`' outside quotes"),
        ("python ~/selftest.py", "'~' outside quotes"),
        ("python tests/*.py", "'*' outside quotes"),
        ("python -m selftest\\nid", "newline"),
        ("python -m selftest\\u0000", "NUL"),
        ("python -m selftest\\tid", "a control character"),
        ("python -c 'unclosed", "cannot be split into words"),
        ("   ", "is empty"),
        ("x" * 1001, "longer than 1000 characters"),
    ],
)
def test_bad_commands_name_the_key_and_say_what_to_write(tmp_path: Path, command: str, needle: str) -> None:
    path = write(tmp_path, f'command = "{command}"\n')
    with pytest.raises(UsageError) as raised:
        load_spec(str(path))
    rendered = raised.value.render()
    assert "[smoke] command" in rendered and needle in rendered, rendered
    assert "single quotes" in raised.value.fix


@pytest.mark.parametrize(
    "command",
    [
        "python -m myproject.selftest",
        "bash -c 'pytest -q tests/gpu && echo ok > /tmp/ok'",  # all of it in single quotes: literal
        'python -c \\"import sys; sys.exit(0)\\"',  # ';' in double quotes: no shell would act on it
        "/opt/venv/bin/selftest --gpus=all",
    ],
)
def test_commands_a_shell_would_read_the_same_are_accepted(tmp_path: Path, command: str) -> None:
    spec = load_spec(str(write(tmp_path, f'command = "{command}"\n')))
    assert spec.smoke.command == command.replace('\\"', '"')


def test_the_flags_take_the_spec_rules(capsys: pytest.CaptureFixture[str]) -> None:
    """Refused by argparse before anything runs: exit 2, naming the flag."""
    cases = [
        (
            ["verify", "x:y", "--smoke-command", "pytest && echo ok"],
            "--smoke-command: 'pytest && echo ok' has '&&'",
        ),
        (
            ["verify", "x:y", "--smoke-import", "scikit-learn"],
            "--smoke-import: 'scikit-learn' is not a Python module",
        ),
        (["smoke", "--command", "echo $HOME"], "argument --command: 'echo $HOME' has '$' outside quotes"),
    ]
    for argv, needle in cases:
        with pytest.raises(SystemExit) as raised:
            main(argv)
        assert raised.value.code == 2
        assert needle in capsys.readouterr().err


def test_from_log_refuses_checks_it_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "job.log"
    log.write_text(json.dumps(PASSED) + "\n")
    code = main(["verify", "envbuild-test/any:tag", "--from-log", str(log), "--smoke-import", "json"])
    assert code == 2
    assert "--from-log judges a run that already happened" in capsys.readouterr().err


# --- how the checks reach the image and the program -------------------------------------------------


def test_render_puts_the_checks_beside_the_smoke_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, 'imports = ["transformers"]\ncommand = "python -m myproject.selftest"\n')
    assert main(["render", "-f", str(path), "-o", str(tmp_path / "out")]) == 0
    context = tmp_path / "out" / "default"
    assert (context / CHECKS_FILE).read_bytes() == checks_file(
        ("transformers",), "python -m myproject.selftest"
    )
    assert (
        "COPY smoke.py smoke_common.py smoke_checks.json /opt/envbuild/\n"
        in (context / "Dockerfile").read_text()
    )
    assert f"!{CHECKS_FILE}" in (context / ".dockerignore").read_text().splitlines()

    (tmp_path / "plain").mkdir()
    plain = write(tmp_path / "plain", "")
    assert main(["render", "-f", str(plain), "-o", str(tmp_path / "plain-out")]) == 0
    context = tmp_path / "plain-out" / "default"
    assert not (context / CHECKS_FILE).exists()  # no checks: the context (and the golden files) as before
    assert "COPY smoke.py smoke_common.py /opt/envbuild/\n" in (context / "Dockerfile").read_text()
    capsys.readouterr()


def test_the_command_line_carries_each_check_as_one_word() -> None:
    argv = smoke_command("cpu", 5, "bf16", imports=("json", "six"), command="-v 'a b'")
    assert argv[-5:] == ("--import", "json", "--import", "six", "--command=-v 'a b'")
    assert smoke_command("cpu", 5, "bf16") == smoke_command("cpu", 5, "bf16", imports=None, command=None)
    assert "--import" not in smoke_command("cpu", 5, "bf16", imports=())
    parsed = common.parse_args(list(argv[2:]), "torch")
    assert parsed[3] == {"imports": ["json", "six"], "command": "-v 'a b'", "argv": ["-v", "a b"]}


def test_the_checks_file_is_what_the_program_reads(tmp_path: Path) -> None:
    path = tmp_path / CHECKS_FILE
    path.write_bytes(checks_file(("transformers", "datasets"), "python -m myproject.selftest"))
    assert common.read_checks_file(str(path)) == (
        ["transformers", "datasets"],
        "python -m myproject.selftest",
    )
    assert common.read_checks_file(str(tmp_path / "absent.json")) == ([], None)
    path.write_text('{"imports": [], "shell": "id"}')
    with pytest.raises(common._ArgumentError, match="is not a checks file"):
        common.read_checks_file(str(path))


def test_the_program_refuses_bad_checks_whichever_way_they_come() -> None:
    """The program applies the spec's rules again: an edited checks file or a hand-typed flag."""
    with pytest.raises(common._ArgumentError, match=r"'a && b' has '&&' outside quotes"):
        common.checked_checks([], "a && b")
    with pytest.raises(common._ArgumentError, match=re.escape("import 'os.path;id'")):
        common.checked_checks(["os.path;id"], None)
    with pytest.raises(common._ArgumentError, match="import 'json' is named twice"):
        common.checked_checks(["json", "json"], None)
    with pytest.raises(common._ArgumentError, match="the imports must be a list"):
        common.checked_checks("json", None)


def test_the_output_kept_of_a_failed_check_is_bounded() -> None:
    text = "\n".join(f"line {n} " + "x" * 150 for n in range(100)) + "\n\n"
    tail = common.output_tail(text)
    assert len(tail) <= common.CHECK_OUTPUT_CHARS + 3 and tail.startswith("...")
    assert tail.endswith("line 99 " + "x" * 150)
    short = common.output_tail("a\n\n" + "\n".join(f"{n}" for n in range(30)))
    assert short.splitlines() == [str(n) for n in range(10, 30)]  # the last CHECK_OUTPUT_LINES


# --- the report, judged -----------------------------------------------------------------------------


def judge(report: dict, exit_code: int, checks: tuple[tuple[str, str], ...] | None = None):
    return judge_output(
        json.dumps(report) + "\n",
        "",
        exit_code,
        device="cpu",
        seconds=1.0,
        image_id="sha256:" + "5" * 64,
        platform="linux/amd64",
        emulated=False,
        runtime="docker",
        checks=checks,
    )


@pytest.mark.parametrize("report", [PASSED, FAILED, OLD], ids=["passed", "failed", "before-checks"])
def test_the_schema_takes_reports_with_and_without_checks(report: dict) -> None:
    assert validate(report) == []
    jsonschema.validate(report, load_schema())


def test_the_schema_refuses_a_malformed_check() -> None:
    broken = copy.deepcopy(PASSED)
    broken["checks"][0]["kind"] = "shell"
    del broken["checks"][1]["passed"]
    errors = validate(broken)
    assert any("report.checks[0].kind" in e for e in errors) and any("missing 'passed'" in e for e in errors)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, load_schema())


def test_a_report_whose_checks_passed_passes() -> None:
    verification = judge(PASSED, 0, asked_checks(("json", "email.mime"), "python -c 'print(1)'"))
    assert verification.passed is True
    assert verification.report["gates"]["checks"] == "passed"
    assert [(c["kind"], c["name"], c["passed"]) for c in verification.report["checks"]] == [
        ("import", "json", True),
        ("import", "email.mime", True),
        ("command", "python -c 'print(1)'", True),
    ]


def test_a_failed_check_fails_the_verify_and_its_text_is_redacted() -> None:
    verification = judge(FAILED, 1)
    assert verification.passed is False
    report = verification.report
    assert report["gates"]["checks"] == "failed" and report["gates"]["training"] == "passed"
    missing, command = (c for c in report["checks"] if not c["passed"])
    assert missing["name"] == "envbuild_no_such_module" and missing["exit_code"] == 1
    assert missing["output"].splitlines()[-1].startswith("ModuleNotFoundError")
    assert command["exit_code"] == 3 and command["output"].startswith("Authorization: ***")
    assert "sekret" not in json.dumps(report)  # the credential a check printed: in no field at all
    assert "sekret" in json.dumps(FAILED)  # (it was there)
    assert [f["gate"] for f in report["failed"]] == ["checks", "checks"]
    assert "[packages] pip" in report["failed"][0]["hint"]


def test_a_check_left_out_of_a_passing_report_is_an_error() -> None:
    """verify asked for a check, and the report that says passed does not list it: not a pass."""
    with pytest.raises(VerifyError) as raised:
        judge(PASSED, 0, asked_checks(("json", "transformers"), None))
    assert "the import checks that ran are ['json', 'email.mime']" in raised.value.message
    assert "asked for ['json', 'transformers']" in raised.value.message
    # --smoke-import alone replaces the image's imports and keeps its command: that one may run
    assert judge(PASSED, 0, asked_checks(("json", "email.mime"), None)).passed is True


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda r: r["checks"][2].update(passed=False), "command \"python -c 'print(1)'\" did not pass"),
        (lambda r: r["gates"].update(checks="skipped: none configured"), "but 3 check(s) ran"),
        (lambda r: r.update(checks=[]), "checks: passed, but no check ran"),
    ],
)
def test_a_passing_report_cannot_contradict_its_checks(mutate, needle: str) -> None:
    forged = copy.deepcopy(PASSED)
    mutate(forged)
    assert any(needle in problem for problem in gate_problems(forged, "cpu")), gate_problems(forged, "cpu")
    with pytest.raises(VerifyError, match="the smoke report says it passed, but "):
        judge(forged, 0)


def test_a_report_from_before_checks_existed_still_passes() -> None:
    assert gate_problems(OLD, "cpu") == []
    assert judge(OLD, 0).passed is True
