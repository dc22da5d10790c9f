"""`envbuild verify REPO@sha256:... --from-log FILE`: judge a smoke run that something else ran.

On Kubernetes the cluster runs the smoke program (`envbuild ci k8s` writes the Job) and envbuild only
sees its output afterwards: `kubectl logs job/NAME > smoke.log`. That output is judged here exactly as
every runtime's is (image.verify.judge_output: the schema, the gates), and the report names the
runtime "kubernetes" and the image id the registry gives for the digest, so `envbuild promote REF
--to TAG --report FILE` promotes from it as from any other.

`kubectl logs` merges stdout and stderr, so the report is the last line that is a JSON object; text
after it (a warning on stderr at exit) is allowed. A log whose last line starts a JSON object that
does not parse was cut off (a log rotated or a pod killed mid-write): that is said, not guessed
around. The exit code is not in a log: a report that says it passed counts as exit 0, any other as 1,
and the gates are checked from the report's own numbers either way.
"""

from __future__ import annotations

import json

from envbuild._util import limits
from envbuild._util.files import NotReadable, read_regular
from envbuild._util.jsontext import parse_json
from envbuild.errors import UsageError, VerifyError
from envbuild.image.verify import Verification, check_schema, judge_output
from envbuild.oci.reference import parse_reference
from envbuild.runtime.driver import identify

RUNTIME = "kubernetes"  # what ran the program, unless the caller says otherwise


def verify_from_log(image: str, path: str, *, device: str = "gpu", runtime: str = RUNTIME) -> Verification:
    """The Verification of the smoke output in `path` for `image` (REPO@sha256:...); nothing runs.
    `runtime`: what ran it, for the report: kubernetes (a Job's log), or enroot (`envbuild ci slurm`'s
    pyxis jobs, where `srun --container-image` runs the program through Enroot)."""
    if not parse_reference(image).digest:
        raise UsageError(
            f"--from-log needs the image by digest, not {image!r}",
            fix="pass REPO@sha256:<digest>, the image the Job ran (its `image:` line)",
        )
    try:
        text = read_regular(path, limit=limits.FILE_BYTES.get()).decode("utf-8", errors="replace")
    except NotReadable as exc:  # /dev/zero, a FIFO, a directory: read for ever, or until memory ran out
        raise UsageError(
            f"--from-log {path}: {exc}",
            fix="pass the regular file `kubectl logs job/NAME > FILE` wrote",
        ) from None
    except OSError as exc:
        raise UsageError(
            f"--from-log {path}: cannot read it ({exc.strerror or exc})",
            fix="pass the file `kubectl logs job/NAME > FILE` wrote",
        ) from None
    line = report_line(text, path)
    report = parse_json(line)
    try:  # a report of the wrong shape is judged before any registry request, naming the log
        check_schema(report)
    except VerifyError as exc:
        raise VerifyError(f"--from-log {path}: {exc.message}", fix=exc.fix) from None
    found = identify(image)
    exit_code = 0 if report.get("passed") is True else 1
    seconds = report.get("duration_s")
    return judge_output(
        line + "\n",
        "",
        exit_code,
        device=device,
        seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
        image_id=found.image_id,
        platform=found.platform,
        emulated=False,
        runtime=runtime,
    )


def report_line(text: str, path: str) -> str:
    """The smoke report's line in a log: the last line that is a JSON object; a VerifyError naming
    the problem when the log was cut off mid-report or holds none."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if not line.startswith("{"):
            continue
        try:
            value = parse_json(line)
        except ValueError as exc:
            unreadable = not isinstance(exc, json.JSONDecodeError) or exc.msg.startswith("nested deeper")
            if line is lines[-1] and unreadable:  # whole, but nested too deep or a 5000-digit number
                raise VerifyError(
                    f"--from-log {path}: the smoke report on its last line is not JSON envbuild reads "
                    f"({str(exc).split(';')[0][:200]})",
                    fix="the smoke program prints a flat JSON report: collect the log of the Job that ran "
                    "`envbuild ci k8s`'s manifest, unedited",
                ) from None
            if line is lines[-1]:
                raise VerifyError(
                    f"--from-log {path}: the smoke report on its last line is cut off "
                    f"({len(line)} characters of JSON that does not end)",
                    fix="collect the whole log again (`kubectl logs job/NAME > FILE` once the Job is "
                    "complete); a pod killed mid-write is a failed verification: rerun the Job",
                ) from None
            continue
        if isinstance(value, dict):
            return line
    tail = " | ".join(lines[-3:])
    raise VerifyError(
        f"--from-log {path}: no smoke report in it (the program prints one JSON line at the end)",
        fix=("its last lines were: " + tail[:500])
        if tail
        else "the file is empty: the Job has not run yet, or its logs were already gone",
    )
