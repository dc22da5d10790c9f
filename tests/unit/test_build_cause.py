"""A failed build step's error quotes its tool's own cause lines (issue 32, item 8), read from real
build output: whole build.log files `envbuild build` wrote on BuildKit and on the classic builder,
and uv's and pip's stderr (tests/fixtures/buildlog/, its README says how each was made). Each log is
replayed line by line through the reader the engine streams the build through."""

from __future__ import annotations

import pytest

from envbuild.image.buildcause import MAX_LINES, MAX_WIDTH, StepWords, buildkit_output
from envbuild.image.builder import BuildKitOutput, ClassicOutput
from tests.helpers.paths import FIXTURES

LOGS = FIXTURES / "buildlog"
LOG_PATH = "/work/build/default/build.log"


def replay_buildkit(name: str) -> str:
    """The BuildError the engine raises for this BuildKit build.log (the docker client exits 1), as
    the command line prints it. The log ends with envbuild's own words (`# envbuild: build stopped:`
    and the error it raised), which are not the client's."""
    output = BuildKitOutput()
    for line in (LOGS / name).read_text().splitlines():
        if line.startswith("# envbuild: build stopped"):
            break
        output.feed(line)
    return output.failure(1, LOG_PATH).render()


def replay_classic(name: str) -> str:
    """The same for the classic builder: the log's stream text up to the Engine's error message,
    which arrives apart from the stream (envbuild writes it to the log as `ERROR: <message>`)."""
    output = ClassicOutput()
    for line in (LOGS / name).read_text().splitlines(keepends=True):
        if line.startswith("ERROR: The command"):
            return output.failure(line[len("ERROR: ") :].strip(), LOG_PATH).render()
        output.feed(line)
    raise AssertionError(f"{name} has no Engine error")


def said(name: str) -> tuple[str, ...]:
    words = StepWords()
    for line in (LOGS / name).read_text().splitlines():
        words.add("1", line)
    return words.causes("1").lines


def test_day_two_names_the_step_and_quotes_uvs_cause() -> None:
    """The issue's Day 2: accelerate added and relocked, the wheelhouse not topped up."""
    error = replay_buildkit("uv-locked-not-in-wheelhouse.buildkit.log")
    head, *quoted = error.splitlines()
    assert head.startswith("error: docker build failed at step 8/10: RUN /opt/envbuild-uv/uv pip install")
    assert "-r /opt/envbuild/requirements.txt" in head  # which layer: the user packages
    assert "--mount=" not in head and head.endswith("(exit code 1); the step's output says:")
    assert quoted[0] == "    error: No solution found when resolving dependencies"
    assert quoted[1] == (
        "      cause: Because accelerate was not found in the provided package locations and you require "
        "accelerate==1.15.0, we can conclude that your requirements are unsatisfiable."
    )
    assert quoted[-1] == f"  fix: read the full log: {LOG_PATH}"
    assert "executor failed running" not in error  # BuildKit's own words, which say nothing of why


def test_the_step_that_stopped_the_build_is_named_not_an_earlier_error_buildkit_recovered_from() -> None:
    error = replay_buildkit("uv-after-a-lost-cache-record.buildkit.log")
    assert error.startswith("error: docker build failed at step 8/10: RUN /opt/envbuild-uv/uv pip install")
    assert "cause: Because accelerate was not found in the provided package locations" in error
    assert "not found: not found" not in error  # the cache records' errors, steps 1 and 2 re-run


def test_a_multi_line_explanation_is_kept_whole() -> None:
    error = replay_buildkit("uv-missing-dependency.buildkit.log")
    assert "at step 6/10: RUN /opt/envbuild-uv/uv pip install" in error
    assert "-r /opt/envbuild/requirements-framework.txt" in error
    assert "cause: Because setuptools was not found in the provided package locations" in error
    assert "And because you require torch==2.13.0, we can conclude that your requirements are" in error


def test_a_hash_mismatch_quotes_both_hashes() -> None:
    error = replay_buildkit("uv-hash-mismatch.buildkit.log")
    lines = [line.strip() for line in error.splitlines()]
    assert lines[1:7] == [
        "error: Failed to download `six==1.16.0`",
        "cause: Hash mismatch for `six==1.16.0`",
        "Expected:",
        "sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254",
        "Computed:",
        "sha256:78f73dc7f4dc08cfd6b723f2f637c8c0826b68b50b2812b205aee88a57f81e36",
    ]
    assert "Resolved 17 packages" not in error  # the step's progress is not a cause


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("apt-unable-to-locate.buildkit.log", "E: Unable to locate package no-such-package-envbuild"),
        ("apt-no-candidate.buildkit.log", "E: Package 'python' has no installation candidate"),
    ],
)
def test_apt_says_which_package(name: str, cause: str) -> None:
    error = replay_buildkit(name)
    assert error.splitlines()[0].startswith("error: docker build failed at step 2/10: RUN apt-get update")
    assert "(exit code 100)" in error  # apt's own status, not the docker client's 1
    assert error.splitlines()[1] == f"    {cause}"
    assert "is not available, but is referred to" not in error  # apt's prose before its E: line


def test_apts_error_joined_to_its_progress_text_is_still_its_cause() -> None:
    """apt writes "Building dependency tree..." to stdout with no newline, then its E: line to stderr;
    when both reach BuildKit in one read they are one log line. CI met it under load: the error then
    quoted nothing and dropped apt's exit status."""
    text = (LOGS / "apt-joined-to-progress.buildkit.log").read_text()
    assert "Building dependency tree...E: Unable to locate package" in text  # as captured
    error = replay_buildkit("apt-joined-to-progress.buildkit.log")
    head, cause = error.splitlines()[:2]
    assert head.endswith(
        "RUN apt-get install -y --no-install-recommends no-such-package-envbuild (exit code 100); "
        "the step's output says:"
    )
    assert cause == "    E: Unable to locate package no-such-package-envbuild"


def test_a_line_that_only_mentions_e_colon_is_no_cause() -> None:
    words = StepWords()
    for line in ("see the docs... E: is apt's prefix", "Reading package lists... Done"):
        words.add("1", line)
    assert words.causes("1").lines == ()


def test_the_classic_builder_quotes_pip_without_its_colour_codes() -> None:
    error = replay_classic("pip-locked-not-in-wheelhouse.api.log")
    assert error.splitlines()[0].startswith("error: docker build failed at step 12/17: RUN pip install")
    assert "(exit code 1)" in error and "\x1b" not in error
    assert error.splitlines()[1:3] == [
        "    ERROR: Could not find a version that satisfies the requirement accelerate==1.15.0 "
        "(from versions: none)",
        "    ERROR: No matching distribution found for accelerate==1.15.0",
    ]
    assert "returned a non-zero code" not in error  # the Engine's words


def test_the_classic_builders_stderr_chunk_inside_a_stdout_line_is_a_line_of_its_own() -> None:
    """The Engine's chunks for `RUN apt-get install -y no-such-package-envbuild` (as docker-py decodes
    them): apt's progress line comes without its newline, and its stderr, in colour, can arrive
    before that newline does."""
    output = ClassicOutput()
    output.feed("Step 2/2 : RUN apt-get install -y --no-install-recommends no-such-package-envbuild\n")
    output.feed(" ---> Running in 9cd5de5f8219\n")
    output.feed("Reading package lists...")
    output.feed("\n")
    output.feed("Building dependency tree...")
    output.feed("\x1b[91mE: Unable to locate package no-such-package-envbuild\n\x1b[0m")
    output.feed("\n")
    output.feed("Removing intermediate container 9cd5de5f8219\n")
    error = output.failure(
        "The command '/bin/sh -c apt-get install -y --no-install-recommends no-such-package-envbuild' "
        "returned a non-zero code: 100",
        LOG_PATH,
    )
    assert error.message.splitlines()[1:] == ["    E: Unable to locate package no-such-package-envbuild"]
    assert "(exit code 100)" in error.message.splitlines()[0]


def test_pip_conflict_keeps_the_conflicting_pins() -> None:
    lines = said("pip-conflict.txt")
    assert lines[0].startswith("ERROR: Cannot install app and other==1.0 because these package versions")
    assert "The conflict is caused by:" in lines
    assert "    other 1.0 depends on base==1" in lines and "    lib 3.0 depends on base==3" in lines
    assert not any("loosen the range" in line for line in lines)  # pip's generic advice


def test_pip_hash_mismatch_keeps_expected_and_got() -> None:
    lines = said("pip-hash-mismatch.txt")
    assert lines[0].startswith("ERROR: THESE PACKAGES DO NOT MATCH THE HASHES")
    assert any(line.strip().startswith("Expected sha256 8abb2f1d") for line in lines)
    assert any(line.strip().startswith("Got        78f73dc7") for line in lines)


def test_older_uvs_boxed_form_is_read_and_dedented() -> None:
    assert said("uv-0.5.31-not-found.txt") == (
        "× No solution found when resolving dependencies:",
        "╰─▶ Because accelerate was not found in the provided package locations and",
        "    you require accelerate==1.15.0, we can conclude that your requirements",
        "    are unsatisfiable.",
    )


@pytest.mark.parametrize("name", ["uv-0.5.31-conflict.txt", "uv-0.13.9-conflict.txt"])
def test_a_long_explanation_is_bounded_and_counted(name: str) -> None:
    words = StepWords()
    text = (LOGS / name).read_text()
    for line in text.splitlines():
        words.add("9", line)
    causes = words.causes("9")
    assert len(causes.lines) == MAX_LINES
    assert causes.lines[0].lstrip("× ").startswith(("No solution found", "error: No solution found"))
    explained = [line for line in text.splitlines() if line.strip() and "Using Python" not in line]
    assert causes.more == len(explained) - MAX_LINES  # what build.log has beyond what is quoted
    # and the error says so, on the BuildKit path the engine takes
    output = BuildKitOutput()
    output.feed("#9 [ 8/10] RUN uv pip install app")
    for line in text.splitlines():
        output.feed(f"#9 0.301 {line}".rstrip())
    output.feed("#9 ERROR: executor failed running [/bin/sh -c uv pip install app]: exit code: 1")
    error = output.failure(1, LOG_PATH).render()
    assert f"    ({causes.more} more such line(s) in the log)" in error


def test_each_line_is_cut_to_the_width_and_redacted() -> None:
    words = StepWords()
    words.add("4", "error: Failed to fetch: `https://alice:s3cret@pypi.example/simple/torch/`")
    words.add("4", "  cause: " + "x" * (MAX_WIDTH * 2))
    lines = words.causes("4").lines
    assert "s3cret" not in lines[0] and "https://***@pypi.example/simple/torch/" in lines[0]
    assert len(lines[1]) == MAX_WIDTH and lines[1].endswith("…")


def test_only_the_failed_steps_lines_are_quoted() -> None:
    """BuildKit runs steps side by side: each vertex's lines are its own."""
    output = BuildKitOutput()
    output.feed("#5 [2/3] RUN apt-get install -y curl")
    output.feed("#6 [3/3] RUN uv pip install x")
    output.feed("#5 1.201 E: Could not get lock /var/lib/dpkg/lock-frontend")
    output.feed("#6 0.410 error: No solution found when resolving dependencies")
    output.feed("#6 0.410   cause: Because x was not found in the package registry")
    output.feed("#6 ERROR: executor failed running [/bin/sh -c uv pip install x]: exit code: 1")
    error = output.failure(1, LOG_PATH).render()
    assert "at step 3/3: RUN uv pip install x (exit code 1)" in error
    assert "Because x was not found" in error and "Could not get lock" not in error


def test_buildkits_own_lines_are_never_a_steps_output() -> None:
    assert buildkit_output("0.281 error: No solution found") == "error: No solution found"
    assert buildkit_output("0.353 ") == "" and buildkit_output("0.353") == ""
    for own in ("ERROR: executor failed running [x]: exit code: 1", "DONE 0.1s", "CACHED", "sha256:ab12"):
        assert buildkit_output(own) is None


def test_without_a_cause_line_the_builders_error_lines_stay() -> None:
    """A step whose tool printed nothing recognisable (`RUN false`) is reported as before."""
    output = BuildKitOutput()
    output.feed("#7 [3/4] RUN false")
    output.feed("#7 ERROR: executor failed running [/bin/sh -c false]: exit code: 1")
    error = output.failure(1, LOG_PATH)
    assert error.message.splitlines() == [
        "docker build failed at step 3/4: RUN false",
        "    exit status 1",
        "    #7 ERROR: executor failed running [/bin/sh -c false]: exit code: 1",
    ]


def test_one_stderr_line_in_two_colour_wrapped_chunks_is_one_line() -> None:
    """The chunking CI's run of tests/engine/test_engine.py met (its build.log: `ESC[91mE ESC[0m`
    then `ESC[91m: Unable to locate package ...`): apt's E: line split after its first letter, each
    part wrapped in colour, read as two lines, and the error quoted neither."""
    output = ClassicOutput()
    output.feed("Step 2/2 : RUN apt-get install -y --no-install-recommends no-such-package-envbuild\n")
    output.feed(" ---> Running in 78a9397dd295\n")
    output.feed("Reading package lists...\n")
    output.feed("Building dependency tree...\n")
    output.feed("\x1b[91mE\x1b[0m")
    output.feed("\x1b[91m: Unable to locate package no-such-package-envbuild\n\x1b[0m")
    output.feed("Removing intermediate container 78a9397dd295\n")
    error = output.failure(
        "The command '/bin/sh -c apt-get install -y --no-install-recommends no-such-package-envbuild' "
        "returned a non-zero code: 100",
        LOG_PATH,
    )
    assert error.message.splitlines()[1:] == ["    E: Unable to locate package no-such-package-envbuild"]
    assert "(exit code 100)" in error.message.splitlines()[0]
