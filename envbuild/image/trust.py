"""Which smoke report files envbuild believes: the one check every promotion from a file goes through.

`trusted_report(path, image_id)` reads a file `envbuild verify --report` wrote and returns it only when
it still says what verify wrote, for the image about to be promoted:

- its `report-digest` is the digest of the rest of it, recomputed here (an edit after verify shows);
- it names this image id (`promote IMAGE`: the local image; `promote REF --to`: the registry's);
- the report matches envbuild/smoke/schema.json and passes every gate the smoke step applies, re-judged
  from its own numbers (smoke.report.gate_problems), on the device the file names.

What this does not do: prove who wrote the file. Anyone who can run envbuild's code can write a file
that passes, digest included; a report is only as trustworthy as the runner that wrote it
(docs/concepts/trust-model.md).
The signed attestation that closes that gap replaces this function, and no caller has to change.
"""

from __future__ import annotations

from envbuild._util import limits
from envbuild._util.files import NotReadable, read_regular
from envbuild._util.jsontext import parse_json
from envbuild._util.record import Record
from envbuild.errors import PromoteError, UsageError
from envbuild.image.verify import REPORT_DIGEST, report_digest, report_document
from envbuild.oci.reference import DIGEST_RE
from envbuild.smoke import DEVICES
from envbuild.smoke.report import gate_problems, validate

_KEYS = ("image", "device", "report", REPORT_DIGEST)
_FIX = (
    "run `envbuild verify IMAGE --report FILE` (or `envbuild build`) on a runner you trust, and promote "
    "with the file it writes, unedited"
)


class TrustedReport(Record):
    """A smoke report file that passed trusted_report: the image id and device it ran on, the smoke
    report, and the digest of the whole (the io.envbuild.smoke.report-digest label)."""

    __slots__ = ("image_id", "device", "report", "digest")
    image_id: str
    device: str
    report: dict
    digest: str


def _refuse(path: str, why: str) -> PromoteError:
    return PromoteError(f"--report {path} {why}: refusing to promote", fix=_FIX)


def trusted_report(path: str, image_id: str) -> TrustedReport:
    """The report in `path` when it is one envbuild verify wrote, unedited, for `image_id` ("sha256:...")
    and passing; a PromoteError (exit 1) naming what does not hold otherwise. An unreadable path is a
    UsageError (exit 2)."""
    try:
        text = read_regular(path, limit=limits.FILE_BYTES.get()).decode("utf-8")
    except NotReadable as exc:
        raise UsageError(
            f"--report {path} cannot be read ({exc})",
            fix="pass the regular file `envbuild verify IMAGE --report FILE` wrote",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--report {path} cannot be read ({getattr(exc, 'strerror', None) or exc})",
            fix="pass the file `envbuild verify IMAGE --report FILE` wrote",
        ) from None
    try:
        saved = parse_json(text)
    except ValueError as exc:
        raise _refuse(path, f"is not JSON ({exc})") from None
    if not isinstance(saved, dict):
        raise _refuse(path, "is not a JSON object")
    missing = [key for key in _KEYS if key not in saved]
    unexpected = sorted(str(key) for key in saved if key not in _KEYS)
    if missing or unexpected:
        parts = [
            f"has no {', '.join(missing)}" if missing else "",
            f"has {', '.join(unexpected)}" if unexpected else "",
        ]
        raise _refuse(
            path, " and ".join(p for p in parts if p) + f" (a verify report holds {', '.join(_KEYS)})"
        )
    image, device, report = saved["image"], saved["device"], saved["report"]
    if not isinstance(image, str) or not DIGEST_RE.fullmatch(image):
        raise _refuse(path, f"names no image id: image {image!r} is not sha256:<64 hex>")
    if device not in DEVICES:
        raise _refuse(path, f"names device {device!r}, not one of {', '.join(DEVICES)}")
    if not isinstance(report, dict):
        raise _refuse(path, "holds no report object")
    digest = report_digest(report_document(image, device, report))
    if saved[REPORT_DIGEST] != digest:
        raise _refuse(
            path, f"does not match its {REPORT_DIGEST}: it was edited after `envbuild verify` wrote it"
        )
    if image != image_id:
        raise _refuse(path, f"was made for {image[:19]}, not for {image_id[:19]}")
    problems = validate(report) or gate_problems(report, device)
    if problems:
        raise _refuse(path, "does not show a passing smoke step: " + "; ".join(problems[:5]))
    return TrustedReport(image_id=image, device=device, report=report, digest=digest)
