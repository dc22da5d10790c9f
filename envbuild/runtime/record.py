"""The record of one `envbuild verify`: what ran, where, with which runtime, and what it gave.

A Slurm verify job or a Kubernetes Job writes it next to the report (`verify --record FILE`), so the
shared directory a promote job reads says which runtime, node and job verified the candidate. The
report file is what promotion trusts (image.trust); this record is for people and dashboards, and
carries the report's digest to tie the two together.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timezone

import envbuild
from envbuild._util.files import write_atomic
from envbuild.image.verify import Verification, report_digest, report_document

# what a batch scheduler says about the job that ran the verification, when it ran under one
_SLURM = {
    "job-id": "SLURM_JOB_ID",
    "job-name": "SLURM_JOB_NAME",
    "partition": "SLURM_JOB_PARTITION",
    "nodes": "SLURM_JOB_NODELIST",
    "gpus": "SLURM_JOB_GPUS",
}


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def verify_record(
    verification: Verification, image: str, *, started: str, finished: str, settings: dict | None = None
) -> dict:
    """settings: the smoke settings and where each came from, {key: {"value", "from": flag | label |
    default}} (spec.smokelabels.SmokeChoice.document); None for a run envbuild did not start (--from-log)."""
    report = verification.report
    document = {
        "envbuild": envbuild.__version__,
        "image": image,
        "image-id": verification.image_id,
        "runtime": verification.runtime,
        "device": verification.device,
        "platform": verification.platform,
        "emulated": verification.emulated,
        "passed": verification.passed,
        "exit-code": verification.exit_code,
        "seconds": verification.seconds,
        "started": started,
        "finished": finished,
        "host": socket.gethostname(),
        "report-digest": report_digest(report_document(verification.image_id, verification.device, report)),
        "gates": report.get("gates", {}),
        "failed": [item.get("gate") for item in report.get("failed", []) if isinstance(item, dict)],
    }
    if settings is not None:
        document["settings"] = settings
    slurm = {key: os.environ[name] for key, name in _SLURM.items() if os.environ.get(name)}
    if slurm:
        document["slurm"] = slurm
    return document


def save_record(path: str, record: dict) -> None:
    write_atomic(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
