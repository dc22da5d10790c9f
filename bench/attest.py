"""What the attest stage costs per image, against the record.json write it follows.

`envbuild build --push` ends each target with the attest stage: the CycloneDX SBOM built and checked
against the 1.6 schema, the SLSA provenance built from the record, both signed (DSSE, Ed25519) and
written next to record.json; `envbuild attest` judges them again. All of it is measured here, in
process, on the repository's real inputs: the record of the torch 2.13.0 end-to-end build and the
inventory captured from that image (tests/fixtures/attest/, data only). The baseline, measured in the
same run, is what the pipeline already does after every stage: redact the record and write
record.json atomically. The inventory container and the registry pushes are not counted (they are the
Engine's and the registry's; the engine tests time them).

Target: all documents for one image, signed, validated and written, in under 3 s on this machine (the
smoke step alone takes longer). Run: `.venv/bin/python bench/attest.py`
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envbuild._util.files import write_atomic  # noqa: E402
from envbuild._util.redact import redact_values  # noqa: E402
from envbuild.attest import fields  # noqa: E402
from envbuild.attest.check import Fetched, judge  # noqa: E402
from envbuild.attest.publish import build_documents, payloads, write_documents  # noqa: E402
from envbuild.attest.record import BuildRecord  # noqa: E402
from envbuild.image.inventory import parse_inventory  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "attest"
REPEAT = 5
TARGET_S = 3.0
SUBJECT = ("127.0.0.1:5000/envbuild-test/e2e", "sha256:" + "4" * 64)


def _best(run) -> float:
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> int:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    record = json.loads((FIXTURES / "record.json").read_text())
    capture = (FIXTURES / "inventory-torch.txt").read_text()
    inventory = parse_inventory(capture, capture.split("\n", 1)[0].rsplit(" ", 1)[0], {})
    record = {**record, "pushed": [{"tag": SUBJECT[0] + ":e2e", "digest": SUBJECT[1]}]}
    key = Ed25519PrivateKey.generate()
    build_documents(
        BuildRecord.from_json(record), inventory, SUBJECT
    )  # imports (cyclonedx, jsonschema) once, outside the timing

    with tempfile.TemporaryDirectory() as scratch:

        def baseline() -> None:
            write_atomic(
                f"{scratch}/record.json", json.dumps(redact_values(record), indent=2, sort_keys=True)
            )

        def documents() -> None:
            sbom, statement = build_documents(BuildRecord.from_json(record), inventory, SUBJECT)
            payloads(sbom, statement, key)
            write_documents(scratch, sbom, statement)

        sbom, statement = build_documents(BuildRecord.from_json(record), inventory, SUBJECT)
        fetched = {
            kind: Fetched(kind=kind, media_type=media_type, payload=data, manifest_subject=SUBJECT[1])
            for kind, data, media_type in payloads(sbom, statement, None)
        }
        labels = {"io.envbuild.spec-digest": "sha256:" + record["stack"]["spec_digest"]}

        def check() -> None:
            judge(SUBJECT[1], labels, fetched)

        base_best, base_median = _best(baseline)
        docs_best, docs_median = _best(documents)
        check_best, check_median = _best(check)
    components = len(sbom["components"])
    print(f"attest stage, one image ({components} SBOM components, signed), best of {REPEAT}:")

    def row(label: str, best: float, median: float, tail: str = "") -> None:
        print(f"  {label:<44}{best * 1000:8.1f} ms (median {median * 1000:.1f}){tail}")

    row("baseline: redact + write record.json", base_best, base_median)
    row(
        "SBOM + provenance + 2 signatures + files",
        docs_best,
        docs_median,
        f"  = {docs_best / base_best:.0f}x",
    )
    row("envbuild attest's judging (fetch excluded)", check_best, check_median)
    ok = docs_best < TARGET_S
    print(
        f"target: documents under {TARGET_S:.0f} s per image: {'met' if ok else 'MISSED'} ({docs_best:.2f} s)"
    )
    print(f"files: {fields.SBOM_FILE}, {fields.PROVENANCE_FILE}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
