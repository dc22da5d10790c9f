"""The BuildError of a failed build, worded alike whichever backend ran it (builder, podmanbuild):
the step, its exit status, and the lines in which its tool said why."""

from __future__ import annotations

import re

from envbuild._util.redact import redact
from envbuild.errors import BuildError
from envbuild.image.buildcause import Causes

# the step's exit status in BuildKit's "executor failed running [...]: exit code: 100" (or "did not
# complete successfully: exit code: 100") and the classic builder's "returned a non-zero code: 100"
_EXIT_CODE = re.compile(r"(?:exit code:|non-zero code:) (\d+)")
_STEP_WIDTH = 160  # characters of a failed step's instruction in the error


def build_failure(
    step: str | None,
    detail: str,
    log_path: str,
    causes: Causes | None = None,
    *,
    tool: str = "docker build",
    codes: list[str] | None = None,
) -> BuildError:
    """The build's error: the step, then the lines in which its tool said why (buildcause) or, when it
    said nothing recognisable, the builder's own error lines; build.log holds the rest. `codes`: the
    step's exit statuses as the builder worded them (None: read Docker's wording from `detail`)."""
    where = f"at step {step}" if step else "before the first step"
    if causes is None or not causes.lines:
        lines = [line for line in redact(detail).splitlines() if line.strip()]
        return BuildError(
            f"{tool} failed {where}" + "".join(f"\n    {line}" for line in lines),
            fix=f"read the full log: {log_path}",
        )
    if codes is None:
        codes = _EXIT_CODE.findall(detail)  # the builder's own line is the last: a tool may print one too
    status = f" (exit code {codes[-1]})" if codes else ""
    more = [f"({causes.more} more such line(s) in the log)"] if causes.more else []
    return BuildError(
        f"{tool} failed {where}{status}; the step's output says:"
        + "".join(f"\n    {line}" for line in (*causes.lines, *more)),
        fix=f"read the full log: {log_path}",
    )


def step_name(number: str, total: str, instruction: str) -> str:
    """ "8/10: RUN /opt/envbuild-uv/uv pip install ... -r /opt/envbuild/requirements.txt": a RUN's
    --mount flags left out (every envbuild RUN has them) and a long instruction cut between words in
    its middle, so the command and what it installs both stay in view."""
    words = instruction.split()
    if words[:1] == ["RUN"]:
        words = [words[0], *(w for w in words[1:] if not w.startswith("--mount="))]
    if len(" ".join(words)) > _STEP_WIDTH:
        head: list[str] = []
        while words and len(" ".join([*head, words[0]])) <= _STEP_WIDTH // 2:
            head.append(words.pop(0))
        tail: list[str] = []
        while words and len(" ".join([words[-1], *tail])) <= _STEP_WIDTH // 2:
            tail.insert(0, words.pop())
        if words and len(head) < 2:  # one word longer than the room: cut it
            head, tail = [" ".join(head + words + tail)[: _STEP_WIDTH // 2]], []
        words = [*head, "…", *tail] if words else [*head, *tail]
    return f"{number}/{total}: {' '.join(words)}"
