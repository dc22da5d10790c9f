"""nvidia/cuda tag sets from the registry's tag list: deleted rows and new releases.

A row is marked deleted only when none of its tags is left: NVIDIA deletes a whole release at once,
and one missing OS is more likely a rename worth a human's look than a deletion.
"""

from __future__ import annotations

from typing import Any

from envbuild.matrix.cuda_tags import CUDNN_KINDS, KINDS, cuda_tag, parse_cuda_tag
from envbuild.matrix.versions import format_minor, parse_patch
from envbuild.refresh.model import Edit, Finding, toml_list, toml_string


def expected_tags(row: dict[str, Any]) -> set[str]:
    version = parse_patch(row["cuda"])
    tags = {cuda_tag(version, None, kind, os) for kind in KINDS for os in row["os"]}
    cudnn = row.get("cudnn_tag") or "cudnn"
    tags |= {cuda_tag(version, cudnn, kind, os) for kind in CUDNN_KINDS for os in row.get("cudnn_os", [])}
    return tags


def image_findings(
    rel: str,
    data: dict[str, Any],
    tags: list[str],
    tags_url: str,
    repository: str,
    known_cuda: set[tuple[int, int, int]],
    day: str,
) -> list[Finding]:
    present = set(tags)
    rows = data["image"]
    findings: list[Finding] = []
    for row in rows:
        expected = expected_tags(row)
        gone = sorted(expected - present)
        subject = f"{repository} {row['cuda']}"
        if row.get("deleted"):
            if expected & present:
                findings.append(
                    Finding(
                        action="flag",
                        file=rel,
                        subject=subject,
                        detail=f"marked deleted on {row['deleted']}, but {len(expected & present)} of its "
                        "tags are listed again; check and remove `deleted` if NVIDIA restored them",
                        source=tags_url,
                        fetched=day,
                        edit=None,
                    )
                )
            continue
        if len(gone) == len(expected):
            line = f"deleted = {toml_string(day)}"
            findings.append(
                Finding(
                    action="add",
                    file=rel,
                    subject=subject,
                    detail=f"every one of its {len(expected)} tags is gone from the registry: mark the row "
                    "deleted, so resolve stops offering it and locks built on it are warned",
                    source=tags_url,
                    fetched=day,
                    edit=Edit(kind="set-key", anchor=row["cuda"], text=line),
                )
            )
        elif gone:
            shown = ", ".join(gone[:6]) + (f" and {len(gone) - 6} more" if len(gone) > 6 else "")
            findings.append(
                Finding(
                    action="flag",
                    file=rel,
                    subject=subject,
                    detail=f"{len(gone)} of its {len(expected)} tags are missing ({shown}); check the row's "
                    "os and cudnn_os lists by hand",
                    source=tags_url,
                    fetched=day,
                    edit=None,
                )
            )
    findings += _new_releases(rel, rows, present, tags_url, repository, known_cuda, day)
    return findings


def _new_releases(
    rel: str,
    rows: list[dict[str, Any]],
    present: set[str],
    tags_url: str,
    repository: str,
    known_cuda: set[tuple[int, int, int]],
    day: str,
) -> list[Finding]:
    """Releases newer than every row of their minor: NVIDIA keeps only the newest patch per minor,
    so an older patch without a row is history, not news."""
    newest: dict[tuple[int, int], tuple[int, int, int]] = {}
    for row in rows:
        version = parse_patch(row["cuda"])
        newest[version[:2]] = max(newest.get(version[:2], version), version)
    floor = min(newest.values()) if newest else (0, 0, 0)
    found: dict[tuple[int, int, int], list] = {}
    for tag in present:
        parsed = parse_cuda_tag(tag)
        if parsed is None or parsed.cuda < floor:
            continue
        if parsed.cuda[:2] in newest and parsed.cuda <= newest[parsed.cuda[:2]]:
            continue
        found.setdefault(parsed.cuda, []).append(parsed)
    findings = []
    for version, parsed_tags in sorted(found.items()):
        text = format_minor(version)
        subject = f"{repository} {text}"
        if version not in known_cuda:
            findings.append(
                Finding(
                    action="flag",
                    file=rel,
                    subject=subject,
                    detail=f"{len(parsed_tags)} tags of CUDA {text} exist, but drivers.toml has no "
                    f"CUDA {text} row with a driver floor; add it from Table 3 of the CUDA release notes, "
                    "then refresh again",
                    source=tags_url,
                    fetched=day,
                    edit=None,
                )
            )
            continue
        oses = sorted({t.os for t in parsed_tags if t.cudnn is None and t.kind == "runtime"})
        cudnn = sorted({t.os for t in parsed_tags if t.cudnn and t.kind == "runtime"})
        cudnn_tags = sorted({t.cudnn for t in parsed_tags if t.cudnn})
        if not oses:
            findings.append(
                Finding(
                    action="flag",
                    file=rel,
                    subject=subject,
                    detail=f"tags of CUDA {text} exist but no runtime tag; check by hand",
                    source=tags_url,
                    fetched=day,
                    edit=None,
                )
            )
            continue
        lines = [
            "[[image]]",
            f"cuda = {toml_string(text)}",
            f"os = {toml_list(oses)}",
            f"cudnn_os = {toml_list(cudnn)}",
        ]
        if len(cudnn_tags) == 1:
            lines.append(f"cudnn_tag = {toml_string(cudnn_tags[0])}")
        # a tag list says nothing of architectures: claim only amd64, which every nvidia/cuda release
        # has had, and leave arm64 to a human reading dist/<ver>/cuda-platforms.json
        lines.append(f"platforms = {toml_list(['linux/amd64'])}")
        note = (
            f"Added by envbuild matrix refresh on {day} from the registry's tag list: the OS lists are the "
            "runtime tags. Bundled cuDNN/NCCL versions are not in the tag list; read them from the image's "
            "NV_CUDNN_VERSION / NV_LIBNCCL_PACKAGE_VERSION. Only linux/amd64 is claimed: add linux/arm64 "
            "with platforms_source after reading the release's dist/<ver>/cuda-platforms.json."
        )
        lines += [f"note = {toml_string(note)}", f"source = {toml_string(tags_url)}"]
        detail = f"new release: runtime on {', '.join(oses)}; cuDNN runtime on {', '.join(cudnn) or 'none'}"
        findings.append(
            Finding(
                action="add",
                file=rel,
                subject=subject,
                detail=detail,
                source=tags_url,
                fetched=day,
                edit=Edit(kind="append-block", anchor="", text="\n".join(lines) + "\n"),
            )
        )
    return findings
