"""`envbuild matrix refresh` against recorded upstream answers served on 127.0.0.1.

The scenario and the recorded answers are envbuild._testing.recorded's (shared with bench/refresh.py):
a copy of the bundled matrix from before a few real releases, with one row made stale on purpose, and
the real PyPI answers, PEP 691 indexes and a paginated nvidia/cuda tag list behind a Bearer challenge.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

from envbuild._testing.recorded import (
    PADDING,
    make_stale_matrix,
    serve_everything,
    serve_pypi,
)
from envbuild._testing.upstream import Answer, Upstream
from envbuild.cli.app import main
from envbuild.matrix.load import load_matrix
from envbuild.refresh.upstream import Http, wheel_metadata
from tests.helpers.paths import EXAMPLES

DAY = "2026-11-29"


@pytest.fixture(autouse=True)
def fixed_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetch date a refresh writes is today's; pin it so the expected rows hold on any day."""
    monkeypatch.setenv("ENVBUILD_TODAY", DAY)


@pytest.fixture
def stale_matrix(tmp_path: Path) -> Path:
    return make_stale_matrix(tmp_path)


@pytest.fixture
def upstream(stale_matrix: Path):
    with Upstream(bearer_prefix="/v2/") as server:
        serve_everything(server, stale_matrix)
        yield server


def refresh_args(upstream: Upstream, matrix: Path, *extra: str) -> list[str]:
    return [
        "matrix", "refresh", "--matrix", str(matrix),
        "--pypi-url", upstream.root,
        "--pytorch-index-url", f"{upstream.root}/whl",
        "--cuda-repository", f"{upstream.host}/nvidia/cuda",
        "--timeout", "10",
        *extra,
    ]  # fmt: skip


def run_refresh(capsys, upstream: Upstream, matrix: Path, *extra: str) -> tuple[int, str, str]:
    code = main(refresh_args(upstream, matrix, *extra))
    out, err = capsys.readouterr()
    return code, out, err


EXPECTED = [
    ("add", "cuda.toml", "nvidia/cuda 12.4.1"),
    ("add", "cuda.toml", "nvidia/cuda 13.1.0"),
    ("flag", "cuda.toml", "nvidia/cuda 12.6.3"),
    ("flag", "cuda.toml", "nvidia/cuda 13.4.0"),
    ("add", "frameworks/jax.toml", "jax 0.12.0.1"),
    ("flag", "frameworks/tensorflow.toml", "tensorflow 2.18.1"),
    ("add", "frameworks/torch.toml", "torch 2.14.1"),
    ("review", "frameworks/torch.toml", "torch 2.15.0"),
    ("flag", "frameworks/torch.toml", "torch cu126"),
    ("flag", "frameworks/torch.toml", "torch cu134"),
]


# --- the tests ------------------------------------------------------------------------------------


def test_refresh_proposes_the_right_rows_and_flags_the_deleted_tag(capsys, upstream, stale_matrix) -> None:
    before = {p: p.read_bytes() for p in stale_matrix.rglob("*.toml")}
    code, out, err = run_refresh(capsys, upstream, stale_matrix, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["fetched"] == DAY and report["written"] is False
    findings = report["findings"]
    assert [(f["action"], f["file"], f["subject"]) for f in findings] == EXPECTED
    by_subject = {f["subject"]: f for f in findings}

    # the deleted tag set: every one of its tags is gone, written as `deleted = <day>`
    deleted = by_subject["nvidia/cuda 12.4.1"]
    assert deleted["edit"] == {"kind": "set-key", "anchor": "12.4.1", "text": f'deleted = "{DAY}"'}
    assert "every one of its" in deleted["detail"]
    assert deleted["source"] == f"{upstream.root}/v2/nvidia/cuda/tags/list"
    # a new tag set of a CUDA release drivers.toml knows: a full row, OS lists from the runtime tags
    row = by_subject["nvidia/cuda 13.1.0"]["edit"]["text"]
    assert 'cuda = "13.1.0"' in row and "cudnn_os = []" in row
    assert '"rockylinux10", "rockylinux8"' in row and '"ubuntu24.04"]' in row
    # surprising data is reported, not guessed
    assert "cm2" in by_subject["nvidia/cuda 12.6.3"]["detail"]
    assert "no CUDA 13.4.0 row with a driver floor" in by_subject["nvidia/cuda 13.4.0"]["detail"]
    assert "no driver floor for CUDA 13.4" in by_subject["torch cu134"]["detail"]
    assert "cu126 builds of 2.13.0" in by_subject["torch cu126"]["detail"]

    # PyPI: patch releases whose real METADATA matches their row are appended
    assert by_subject["torch 2.14.1"]["edit"] == {
        "kind": "append-version",
        "anchor": "2.14.0",
        "text": "2.14.1",
    }
    assert "cu130: cuda 13.0, cudnn 9.24.0.43, nccl 2.30.7" in by_subject["torch 2.14.1"]["detail"]
    assert by_subject["jax 0.12.0.1"]["edit"]["text"] == "0.12.0.1"
    # a stale row is flagged with the difference, not overwritten
    assert "nccl 2.21.5 (row: 2.21.4)" in by_subject["tensorflow 2.18.1"]["detail"]
    # a new minor is proposed for review with the facts PyPI gives and the arch left to a human
    proposal = by_subject["torch 2.15.0"]
    assert proposal["source"] == f"{upstream.root}/pypi/torch/json" and proposal["fetched"] == DAY
    assert proposal["edit"]["kind"] == "append-block"
    block = proposal["edit"]["text"]
    for line in (
        '# versions = ["2.15.0"]',
        '# python = ["3.11", "3.12", "3.13", "3.14", "3.15"]',
        '# pypi_variant = "cu132"',
        '#   cuda = "13.2"',
        '#   cudnn = "9.26.0.51"',
        '#   nccl = "2.30.7"',
        '#   index_url = "https://download.pytorch.org/whl/cu132"',
        '#   arch = "?"',
    ):
        assert line in block, line
    assert "Requires-Python >=3.11" in block

    # METADATA came from range requests: a fraction of each wheel, never the whole file
    wheel_paths = {path for path, _, _, _ in upstream.log if path.startswith("/files/")}
    assert wheel_paths and all(r is not None for p, r, _, _ in upstream.log if p.startswith("/files/"))
    for path in wheel_paths:
        assert upstream.bytes_sent(path) < PADDING / 4, path
    # the tag list was read through the Bearer challenge and both pages
    assert any(status == 401 for path, _, status, _ in upstream.log if path.startswith("/v2/"))
    assert (
        sum(1 for p, _, s, _ in upstream.log if p.startswith("/v2/nvidia/cuda/tags/list") and s == 200) == 2
    )
    assert {p: p.read_bytes() for p in stale_matrix.rglob("*.toml")} == before  # no --write: untouched


def test_text_output_names_source_and_date_for_every_finding(capsys, upstream, stale_matrix) -> None:
    code, out, _ = run_refresh(capsys, upstream, stale_matrix)
    assert code == 0
    assert out.startswith(f"envbuild matrix refresh: pypi, pytorch-index, nvidia-cuda-tags read on {DAY}\n")
    symbols = re.findall(r"^  ([+?!]) (.+?):", out, re.M)
    assert [(s, subject) for s, subject in symbols] == [
        ({"add": "+", "review": "?", "flag": "!"}[a], subject) for a, _, subject in EXPECTED
    ]
    assert out.count(f"(fetched {DAY})") == len(EXPECTED)
    assert "4 to add, 1 for review, 5 flagged" in out
    assert "nothing written: run again with --write" in out


def test_write_keeps_comments_passes_check_and_a_second_refresh_proposes_nothing(
    capsys, upstream, stale_matrix
) -> None:
    before = {p.relative_to(stale_matrix).as_posix(): p.read_text() for p in stale_matrix.rglob("*.toml")}
    code, out, err = run_refresh(capsys, upstream, stale_matrix, "--write")
    assert code == 0, err
    assert "wrote the + and ? findings" in out
    after = {p.relative_to(stale_matrix).as_posix(): p.read_text() for p in stale_matrix.rglob("*.toml")}
    changed = {rel for rel in before if before[rel] != after[rel]}
    assert changed == {"cuda.toml", "frameworks/jax.toml", "frameworks/torch.toml"}
    for rel in changed:  # only additions, except a versions array that grows (comments all kept)
        diff = list(difflib.ndiff(before[rel].split("\n"), after[rel].split("\n")))
        removed = [line[2:] for line in diff if line.startswith("- ")]
        added = [line[2:] for line in diff if line.startswith("+ ")]
        for line in removed:
            assert line.startswith("versions = [") and any(a.startswith(line[:-1] + ", ") for a in added), (
                line
            )
    assert 'versions = ["2.14.0", "2.14.1"]' in after["frameworks/torch.toml"]
    assert '"0.12.0", "0.12.0.1"]' in after["frameworks/jax.toml"]
    assert "# envbuild-refresh: proposed torch 2.15.0 on 2026-11-29" in after["frameworks/torch.toml"]
    assert re.search(r'cuda = "12\.4\.1"\n(?:[^\[\n].*\n)*?deleted = "2026-11-29"\n', after["cuda.toml"])

    # round trip: the written matrix passes the check, and the tools use what was written
    assert main(["matrix", "check", "--matrix", str(stale_matrix)]) == 0
    matrix = load_matrix(stale_matrix)
    assert next(i for i in matrix.images if i.cuda == (12, 4, 1)).deleted == DAY
    assert matrix.image_for((12, 4), "ubuntu22.04") is None  # a deleted tag set is never offered
    assert {"2.14.1"} <= {r.version for r in matrix.framework("torch").releases}
    capsys.readouterr()

    # idempotence: nothing left to add or review; the report-only flags are still reported
    code, out, _ = run_refresh(capsys, upstream, stale_matrix, "--json", "--write")
    findings = json.loads(out)["findings"]
    assert code == 0 and [f for f in findings if f["action"] != "flag"] == []
    assert [(f["action"], f["subject"]) for f in findings] == [(a, s) for a, _, s in EXPECTED if a == "flag"]
    assert {
        p.relative_to(stale_matrix).as_posix(): p.read_text() for p in stale_matrix.rglob("*.toml")
    } == after


def test_sources_can_be_chosen(capsys, upstream, stale_matrix) -> None:
    code, out, _ = run_refresh(capsys, upstream, stale_matrix, "--json", "--source", "nvidia-cuda-tags")
    assert code == 0
    assert {f["file"] for f in json.loads(out)["findings"]} == {"cuda.toml"}
    assert not any(p.startswith(("/pypi/", "/whl/")) for p, _, _, _ in upstream.log)
    code = main(refresh_args(upstream, stale_matrix, "--source", "pypi,crates"))
    err = capsys.readouterr().err
    assert code == 2 and "unknown source crates" in err and "pypi, pytorch-index, nvidia-cuda-tags" in err


def test_without_range_support_the_wheel_is_downloaded_once(stale_matrix) -> None:
    with Upstream() as server:
        serve_pypi(server, ranges=False)
        name = "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"
        metadata = wheel_metadata(Http(timeout=10), f"{server.root}/files/{name}")
    assert not metadata.ranged and "Requires-Dist: nvidia-nccl-cu13==2.30.7" in metadata.text
    assert metadata.bytes_read > PADDING
    assert [s for p, _, s, _ in server.log if p == f"/files/{name}"] == [200]


@pytest.mark.parametrize(
    "break_it, message",
    [
        (
            lambda s: s.routes.update({"/pypi/torch/json": Answer(b"<html>maintenance</html>")}),
            "malformed response from http://127.0.0.1:",
        ),
        (lambda s: s.routes.update({"/pypi/jax/json": Answer(b'{"info": {}}')}), "no 'releases' object"),
        (
            lambda s: s.routes.update({"/v2/nvidia/cuda/tags/list?n=1000": Answer(b'{"tags": "12.4.1"}')}),
            "malformed tag list",
        ),
        (
            lambda s: s.routes.update(
                {
                    "/whl/cu130/torch/": Answer(
                        b'{"files": 3}', content_type="application/vnd.pypi.simple.v1+json"
                    )
                }
            ),
            "no 'files' list",
        ),
        (lambda s: s.closed_paths.add("/pypi/tensorflow/json"), "unreachable after 3 attempt(s)"),
        (lambda s: s.routes.update({"/pypi/torch/json": Answer(b"busy", status=503)}), "answered HTTP 503"),
    ],
)
def test_network_failures_and_malformed_answers_write_nothing(
    capsys, upstream, stale_matrix, break_it, message, monkeypatch
) -> None:
    monkeypatch.setattr("envbuild._util.http.BACKOFF_START_S", 0)
    before = {p: p.read_bytes() for p in stale_matrix.rglob("*.toml")}
    break_it(upstream)
    code, out, err = run_refresh(capsys, upstream, stale_matrix, "--write")
    assert code == 1 and message in err, err
    assert "Traceback" not in err and "fix:" in err and out == ""
    assert {p: p.read_bytes() for p in stale_matrix.rglob("*.toml")} == before


def test_unreachable_upstream_is_a_clear_error(capsys, stale_matrix, monkeypatch) -> None:
    import socket

    monkeypatch.setattr("envbuild._util.http.BACKOFF_START_S", 0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(
        ["matrix", "refresh", "--matrix", str(stale_matrix), "--source", "pypi", "--write",
         "--pypi-url", f"http://127.0.0.1:{port}", "--timeout", "2"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and f"http://127.0.0.1:{port}/pypi/" in err and "unreachable" in err
    assert "fix:" in err


def test_write_refuses_rows_that_would_fail_the_check(stale_matrix) -> None:
    """A refresh bug must not land: the edited matrix is checked before any file is replaced."""
    from envbuild.errors import MatrixError
    from envbuild.refresh.edit import edited_texts, write_checked
    from envbuild.refresh.model import Edit, Finding

    before = {p: p.read_bytes() for p in stale_matrix.rglob("*.toml")}
    unknown_release = '[[image]]\ncuda = "99.0.0"\nos = ["ubuntu24.04"]\nsource = "https://x.org"\n'
    good = Finding(
        action="add",
        file="frameworks/jax.toml",
        subject="jax 0.12.0.1",
        detail="",
        source="http://x",
        fetched=DAY,
        edit=Edit(kind="append-version", anchor="0.12.0", text="0.12.0.1"),
    )
    bad = Finding(
        action="add",
        file="cuda.toml",
        subject="nvidia/cuda 99.0.0",
        detail="",
        source="http://x",
        fetched=DAY,
        edit=Edit(kind="append-block", anchor="", text=unknown_release),
    )
    with pytest.raises(MatrixError, match="nothing was written") as caught:
        write_checked(str(stale_matrix), edited_texts(str(stale_matrix), [good, bad]))
    assert "99.0.0" in caught.value.message
    assert {p: p.read_bytes() for p in stale_matrix.rglob("*.toml")} == before


def test_bad_settings_are_usage_errors(capsys, stale_matrix) -> None:
    code = main(["matrix", "refresh", "--matrix", str(stale_matrix), "--pypi-url", "ftp://mirror"])
    err = capsys.readouterr().err
    assert code == 2 and "--pypi-url 'ftp://mirror' is not an http(s) URL" in err
    code = main(["matrix", "refresh", "--matrix", str(stale_matrix), "--cuda-repository", "Bad Repo"])
    assert code == 2 and "malformed image reference" in capsys.readouterr().err


# --- the scheduled workflow example ---------------------------------------------------------------

WORKFLOW = EXAMPLES / "github" / "matrix-refresh.yml"


def test_refresh_workflow_example_passes_the_github_workflow_schema() -> None:
    from tests.helpers.workflows import check_workflow

    result = check_workflow(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_refresh_workflow_runs_real_envbuild_commands_and_opens_a_pull_request() -> None:
    import shlex

    from envbuild.cli.parser import build_parser
    from tests.helpers.workflows import yaml_load

    workflow = yaml_load(WORKFLOW.read_text())
    assert workflow["on"]["schedule"][0]["cron"] and "workflow_dispatch" in workflow["on"]
    assert workflow["permissions"] == {"contents": "write", "pull-requests": "write"}
    steps = workflow["jobs"]["refresh"]["steps"]
    commands = [
        line.strip()
        for step in steps
        for line in step.get("run", "").splitlines()
        if line.strip().startswith("envbuild ")
    ]
    assert commands == [
        "envbuild matrix refresh --write",
        "envbuild matrix refresh --requirements --write",  # keeps matrix/requirements.toml current
        "envbuild matrix check",
    ]
    for command in commands:  # every flag the example uses exists
        argv = shlex.split(command)[1:]
        parsed = build_parser(argv)[0].parse_args(argv)
        assert parsed.command == "matrix"
    pull_request = next(s for s in steps if s.get("uses", "").startswith("peter-evans/create-pull-request@"))
    assert (
        pull_request["with"]["add-paths"] == "matrix/**" and pull_request["with"]["body-path"] == "refresh.md"
    )
    refresh_step = next(s for s in steps if "matrix refresh" in s.get("run", ""))
    assert steps.index(refresh_step) < steps.index(pull_request)
