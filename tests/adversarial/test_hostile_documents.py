"""Issue 33: a document envbuild did not write, of the wrong shape, is a clear error naming the file
or the field, never an AttributeError, a TypeError or "internal error". `subject: 5` in a provenance
statement, `"metadata": []` in an SBOM (even inside a validly signed envelope), `"passed": 5` in a smoke
report, `gpu = 5` in a matrix file, a table where a spec string belongs, a 1 MB label, and a corrupt
cache entry (which is a miss, not a crash).

Table-driven: each reader has a list of hostile shapes, written to a file in the test's temporary
directory and read through the real command (envbuild.cli.app.main, as tests/unit/test_audit_cli.py
runs it), or, for the attestation checks, which read what a registry served, through the judging
function `envbuild attest` calls on the fetched bytes. The commands that would contact a registry
name one nothing listens on: each document is refused before any request.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from envbuild.attest import dsse, fields
from envbuild.attest.check import Fetched, judge
from envbuild.attest.provenance import build_provenance, statement_bytes
from envbuild.attest.record import BuildRecord
from envbuild.cli.app import main
from envbuild.image import auditcache
from envbuild.image.layerfacts import LayerFacts
from tests.helpers import attest as A
from tests.helpers.paths import MATRIX_DIR
from tests.helpers.reports import captured

IMAGE = "127.0.0.1:9/envbuild-test/hostile@sha256:" + "a" * 64  # a port nothing listens on
BIG = "a" * 1_000_000  # a 1 MB text field


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


def _clear(code: int, err: str, expected: int, *named: str) -> None:
    assert code == expected, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert "fix:" in err, err
    for text in named:
        assert text in err, err
    assert len(err) < 20_000, "a long value is quoted by its start, not printed whole"


def _set(document: Any, path: tuple, value: Any) -> Any:
    """A deep copy of `document` with the value at `path` replaced."""
    if not path:
        return value
    changed = copy.deepcopy(document)
    at = changed
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return changed


# ---------------------------------------------------------------------------------------------
# attestations: what `envbuild attest` judges once a registry served the bytes

SUBJECTS = [(A.REPOSITORY, A.SUBJECT)]
PROVENANCE_SHAPES = [
    (("subject",), 5, "provenance statement subject", "subject is a number"),
    (("subject",), [5], "provenance statement subject", "subject holds an entry"),
    (("subject",), "sha256:" + "a" * 64, "provenance statement subject", "subject is a string"),
    (("subject", 0, "digest"), 5, "provenance statement subject", "subject holds an entry"),
    (("subject", 0, "digest"), {"sha256": 5}, "provenance statement subject", "none"),
    (("predicate",), [], "provenance statement type", "predicate is a list, not an object"),
    (
        ("predicate", "buildDefinition"),
        5,
        "provenance statement type",
        "predicate.buildDefinition is a number",
    ),
    (
        ("predicate", "buildDefinition", "internalParameters"),
        [],
        "provenance statement type",
        "internalParameters",
    ),
    (("predicate", "buildDefinition", "externalParameters"), "x", "label spec digest", "provenance none"),
    (("predicate", "runDetails", "byproducts"), {}, "provenance statement type", "byproducts is an object"),
    (("predicate", "buildDefinition", "externalParameters", "spec"), {"digest": []}, "label spec digest", ""),
    ((), [], "provenance readable", "not a JSON object"),
    ((), 5, "provenance readable", "not a JSON object"),
]
SBOM_SHAPES = [
    (("metadata",), [], "sbom valid", ""),
    (("metadata", "properties"), 5, "sbom valid", ""),
    (("metadata", "properties"), [5, "x"], "sbom valid", ""),
    (("components",), 5, "sbom valid", ""),
    (("components", 0, "properties"), 5, "sbom valid", ""),
    (("components",), [5], "sbom valid", ""),
]
ENVELOPE_SHAPES = [
    (("payload",), 3, "payload is missing or not a string"),
    (("payload",), [], "payload is missing or not a string"),
    (("payloadType",), 5, "not an object with payloadType"),
    (("signatures",), 3, "no signature by this key"),
    (("signatures",), [5, "x"], "no signature by this key"),
    (("signatures", 0, "sig"), 5, "signature invalid"),
    ((), [], "not an object with payloadType"),
]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory):
    where = tmp_path_factory.mktemp("keys")
    private = A.write_key(where / "key.pem", "ed25519")
    public = A.write_public(private, where / "key.pub")
    return dsse.load_signing_key(str(private)), dsse.load_public_key(str(public))


def _fetched(kind: str, media_type: str, payload: bytes) -> Fetched:
    return Fetched(kind=kind, media_type=media_type, payload=payload, manifest_subject=A.SUBJECT)


def _failed(judgement, name: str, detail: str) -> None:
    assert not judgement.ok
    failed = {check.name: check.detail for check in judgement.failed}
    assert name in failed, judgement.document()
    assert detail in failed[name], failed[name]


@pytest.mark.parametrize(("path", "value", "check", "detail"), PROVENANCE_SHAPES)
def test_a_provenance_of_the_wrong_shape_fails_a_named_check(keys, path, value, check, detail) -> None:
    statement = _set(build_provenance(BuildRecord.from_json(A.record()), SUBJECTS), path, value)
    body = json.dumps(statement).encode()
    plain = {
        fields.KIND_SBOM: _fetched(fields.KIND_SBOM, fields.SBOM_MEDIA_TYPE, json.dumps(A.sbom()).encode()),
        fields.KIND_PROVENANCE: _fetched(fields.KIND_PROVENANCE, fields.STATEMENT_MEDIA_TYPE, body),
    }
    _failed(judge(A.SUBJECT, A.image_labels(), plain), check, detail)
    # the same statement validly signed: the signature verifies, the shape still fails its check
    private, public = keys
    wrapped = dsse.sbom_statement(A.sbom(), SUBJECTS)
    signed = {
        fields.KIND_SBOM: _fetched(
            fields.KIND_SBOM,
            fields.DSSE_MEDIA_TYPE,
            json.dumps(dsse.sign(statement_bytes(wrapped), private)).encode(),
        ),
        fields.KIND_PROVENANCE: _fetched(
            fields.KIND_PROVENANCE, fields.DSSE_MEDIA_TYPE, json.dumps(dsse.sign(body, private)).encode()
        ),
    }
    judgement = judge(A.SUBJECT, A.image_labels(), signed, public_key=public)
    assert judgement.signing == "verified"
    _failed(judgement, check, detail)


@pytest.mark.parametrize(("path", "value", "check", "detail"), SBOM_SHAPES)
def test_an_sbom_of_the_wrong_shape_fails_a_named_check(keys, path, value, check, detail) -> None:
    sbom = _set(A.sbom(), path, value)
    provenance = statement_bytes(build_provenance(BuildRecord.from_json(A.record()), SUBJECTS))
    plain = {
        fields.KIND_SBOM: _fetched(fields.KIND_SBOM, fields.SBOM_MEDIA_TYPE, json.dumps(sbom).encode()),
        fields.KIND_PROVENANCE: _fetched(fields.KIND_PROVENANCE, fields.STATEMENT_MEDIA_TYPE, provenance),
    }
    _failed(judge(A.SUBJECT, A.image_labels(), plain), check, detail)
    private, _ = keys
    envelope = dsse.sign(statement_bytes(dsse.sbom_statement(sbom, SUBJECTS)), private)
    signed = {
        **plain,
        fields.KIND_SBOM: _fetched(fields.KIND_SBOM, fields.DSSE_MEDIA_TYPE, json.dumps(envelope).encode()),
    }
    _failed(judge(A.SUBJECT, A.image_labels(), signed), check, detail)


@pytest.mark.parametrize("levels", [250, 400])
def test_an_sbom_nested_deeper_than_the_schema_check_follows_fails_it(levels: int) -> None:
    """Components within components: json parses it (under its depth limit), but the CycloneDX schema
    check recursed per level and ended in RecursionError, an internal error of `envbuild attest`."""
    deep = '{"type": "library", "name": "x", "components": [' * levels + '{"type": "library", "name": "x"}'
    body = json.dumps(A.sbom()).replace('"components": [', '"components": [' + deep + "]}" * levels + ", ", 1)
    provenance = statement_bytes(build_provenance(BuildRecord.from_json(A.record()), SUBJECTS))
    documents = {
        fields.KIND_SBOM: _fetched(fields.KIND_SBOM, fields.SBOM_MEDIA_TYPE, body.encode()),
        fields.KIND_PROVENANCE: _fetched(fields.KIND_PROVENANCE, fields.STATEMENT_MEDIA_TYPE, provenance),
    }
    _failed(judge(A.SUBJECT, A.image_labels(), documents), "sbom valid", "nests deeper than the CycloneDX")


@pytest.mark.parametrize(("path", "value", "detail"), ENVELOPE_SHAPES)
def test_an_envelope_of_the_wrong_shape_fails_its_signature_check(keys, path, value, detail) -> None:
    private, public = keys
    envelope = dsse.sign(
        statement_bytes(build_provenance(BuildRecord.from_json(A.record()), SUBJECTS)), private
    )
    body = json.dumps(_set(envelope, path, value)).encode()
    documents = {fields.KIND_PROVENANCE: _fetched(fields.KIND_PROVENANCE, fields.DSSE_MEDIA_TYPE, body)}
    _failed(judge(A.SUBJECT, A.image_labels(), documents, public_key=public), "provenance signature", detail)


# ---------------------------------------------------------------------------------------------
# attest --attach --record FILE: the build record read back, before any registry request

RECORD_SHAPES = [
    ({"pushed": 5}, "field pushed is a number, not a list"),
    ({"pushed": [5]}, "field pushed[0] is not an object"),
    ({"pushed": [{"tag": "x", "digest": 5}]}, "field pushed[0].digest is not a string"),
    ({"images": []}, "field images is a list, not an object"),
    ({"images": {"promoted": 5}}, "field images.promoted is not a string"),
    ({"stack": "x"}, "field stack is a string, not an object"),
    ({"dependencies": [5]}, "field dependencies[0] is not an object"),
    ({"dependencies": [{"hashes": "sha256:x"}]}, "field dependencies[0].hashes is not a list"),
    ({"tags": [5]}, "field tags is not a list of strings"),
    ({"base_image": ["x"]}, "field base_image is a list, not a string"),
    ([], "is not a JSON object"),
    ("[" * 100_000, "cannot be read as JSON"),
    ('{"notes": ' + "[" * 900 + "]" * 900 + "}", "it nests more than 64 levels deep"),
]


@pytest.mark.parametrize(("document", "problem"), RECORD_SHAPES)
def test_a_record_of_the_wrong_shape_is_exit_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, document: Any, problem: str
) -> None:
    record = tmp_path / "record.json"
    record.write_text(document if isinstance(document, str) else json.dumps(document))
    code, err = run_cli(capsys, "attest", IMAGE, "--attach", "--record", str(record))
    _clear(code, err, 2, f"--record {record}", problem)
    assert "unreachable" not in err


# ---------------------------------------------------------------------------------------------
# verify --from-log FILE: the smoke report line a cluster's job printed


def _report_line(path: tuple, value: Any) -> str:
    return json.dumps(_set(captured("torch-cpu-passed.json"), path, value))


LOG_SHAPES = [
    ('{"passed": 5}', "does not match envbuild/smoke/schema.json"),
    (_report_line(("passed",), 5), "does not match envbuild/smoke/schema.json"),
    (_report_line(("losses",), "x"), "does not match envbuild/smoke/schema.json"),
    (_report_line(("losses",), [[]]), "does not match envbuild/smoke/schema.json"),
    (_report_line(("device_used",), []), "does not match envbuild/smoke/schema.json"),
    (_report_line(("duration_s",), {"a": 1}), "does not match envbuild/smoke/schema.json"),
    (_report_line(("checks",), 5), "does not match envbuild/smoke/schema.json"),
    ("[5]", "no smoke report in it"),
    ("5", "no smoke report in it"),
    ('"passed"', "no smoke report in it"),
    ('{"passed": true, "losses": [1', "is cut off"),
    ("[" * 100_000 + "]" * 100_000, "no smoke report in it"),
    ("{" + '"a": {' * 5000 + "}" * 5001, "is not JSON envbuild reads (nested deeper"),
    ('{"passed": ' + "1" * 5000 + "}", "is not JSON envbuild reads (Exceeds the limit"),
]


@pytest.mark.parametrize(("line", "problem"), LOG_SHAPES, ids=range(len(LOG_SHAPES)))
def test_a_smoke_log_of_the_wrong_shape_is_a_failed_verification_naming_the_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str, problem: str
) -> None:
    """Exit 1: a report that is not a passing one is a failed verification (docs/ci.md), judged before
    the registry is asked for the image."""
    log = tmp_path / "job.log"
    log.write_text("starting\n" + line + "\n")
    code, err = run_cli(capsys, "verify", IMAGE, "--from-log", str(log), "--smoke-device", "cpu")
    _clear(code, err, 1, f"--from-log {log}", problem)
    assert "unreachable" not in err


# ---------------------------------------------------------------------------------------------
# matrix files: --matrix DIR (resolve: exit 2; matrix check: exit 1, "the data has problems")

MATRIX_SHAPES = [
    ("gpus.toml", "gpu = 5\n", "gpus.toml: gpu must be an array of tables"),
    ("gpus.toml", "gpu = [5]\n", "gpus.toml: [[gpu]] #1: expected a table"),
    ("gpus.toml", '[[gpu]]\nname = []\ncc = "9.0"\n', "gpus.toml: [[gpu]] #1"),
    ("gpus.toml", f'[[gpu]]\nname = "{BIG}"\ncc = "9.0"\n', "more than the 8,192 a matrix field may hold"),
    (
        "gpus.toml",
        '[[gpu]]\nname = "H100"\ncompute_capability = {a = 1}\n',
        "#1 (name = 'H100'): compute_capability",
    ),
    ("drivers.toml", 'branch = "550"\n', "drivers.toml"),
    ("frameworks/torch.toml", 'framework = "torch"\n', "frameworks/torch.toml"),
    ("frameworks/torch.toml", "[framework]\nname = 5\n", "frameworks/torch.toml"),
    ("cuda.toml", "image = {a = 1}\n", "cuda.toml"),
    ("os.toml", "[[os]]\nimage = [1, 2]\n", "os.toml"),
    ("gpus.toml", "x = " + "1" * 5000 + "\n", "gpus.toml: not valid TOML: a value envbuild cannot read"),
]


@pytest.mark.parametrize(("name", "text", "problem"), MATRIX_SHAPES, ids=range(len(MATRIX_SHAPES)))
def test_a_matrix_file_of_the_wrong_shape_names_the_file_and_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str, problem: str
) -> None:
    root = tmp_path / "matrix"
    shutil.copytree(MATRIX_DIR, root)
    (root / name).write_text(text)
    code, err = run_cli(capsys, "resolve", "--driver", "550", "--framework", "torch", "--matrix", str(root))
    _clear(code, err, 2, problem)
    code, err = run_cli(capsys, "matrix", "check", "--matrix", str(root))
    _clear(code, err, 1, problem)


@pytest.mark.parametrize(
    ("remove", "missing"),
    [
        ("frameworks", "missing frameworks/"),
        ("frameworks/*", "missing frameworks/*.toml"),
        ("drivers.toml", "missing drivers.toml"),
        ("gpus.toml os.toml", "missing gpus.toml, os.toml"),
    ],
)
def test_an_incomplete_matrix_names_the_missing_files_not_no_stack(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, remove: str, missing: str
) -> None:
    root = tmp_path / "matrix"
    shutil.copytree(MATRIX_DIR, root)
    for pattern in remove.split():
        for path in root.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for args in (("resolve", "--driver", "550", "--framework", "torch"), ("matrix", "check")):
        code, err = run_cli(capsys, *args, "--matrix", str(root))
        _clear(code, err, 2, f"matrix directory {root}", missing)
        assert "no compatible stack" not in err


# ---------------------------------------------------------------------------------------------
# caches under ENVBUILD_CACHE_DIR: a corrupt or wrongly shaped entry is a miss


@pytest.mark.parametrize(
    "entry",
    [
        "not json",
        "[]",
        '{"digest": 5}',
        '{"digest": "DIGEST", "files": 5}',
        '{"digest": "DIGEST", "files": {}}',
        "REAL:files.gpus.toml.kind=cuda",
        "REAL:files.gpus.toml.data=5",
        "REAL:files.gpus.toml.data.gpu=5",
        "REAL:files.gpus.toml.data.gpu=[5]",
        "REAL:files.cuda.toml.data={}",
        "[" * 100_000,
    ],
)
def test_a_corrupt_matrix_cache_entry_is_a_miss(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(cache))
    args = ("resolve", "--driver", "550", "--framework", "torch", "--matrix", str(MATRIX_DIR), "--json")
    code, _ = run_cli(capsys, *args)
    assert code == 0
    (written,) = cache.iterdir()  # the entry the first run wrote
    genuine = json.loads(written.read_text())
    if entry.startswith("REAL:"):
        where, _, value = entry[len("REAL:") :].partition("=")
        keys = where.replace(".toml", "\0toml").split(".")
        path = tuple(key.replace("\0toml", ".toml") for key in keys)
        entry = json.dumps(_set(genuine, path, json.loads(value) if value[:1] in "[{0123456789" else value))
    written.write_text(entry.replace("DIGEST", genuine["digest"]))
    code, err = run_cli(capsys, *args)
    assert code == 0 and "internal error" not in err, err
    assert json.loads(written.read_text()) == genuine  # parsed afresh and replaced
    assert [p.name for p in cache.iterdir()] == [written.name]


@pytest.mark.parametrize(
    "entry",
    [
        b"",
        b"not json",
        b"[]",
        b'{"format": 4, "layer": "LAYER", "deleted": 5, "opaque": [], "replaced": [], "objects": []}',
        b'{"format": 4, "layer": "LAYER", "deleted": [], "opaque": [], "replaced": [], "objects": 5}',
        b'{"format": 4, "layer": "LAYER", "deleted": [], "opaque": [], "replaced": [], "objects": [5]}',
        b'{"format": 4, "layer": "LAYER", "deleted": [], "opaque": [], "replaced": [],'
        b' "objects": [["lib.so", 5, [], null, 1]]}',
        b"[" * 100_000,
        b" " * (auditcache.MAX_BYTES + 1),
    ],
    ids=range(9),
)
def test_a_corrupt_audit_cache_entry_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: bytes
) -> None:
    monkeypatch.setenv("ENVBUILD_CACHE_DIR", str(tmp_path / "cache"))
    binary = tmp_path / "cuobjdump"
    binary.write_bytes(b"a stand-in: the cache keys on the binary's bytes")
    layer = "sha256:" + "b" * 64
    auditcache.store_layer(
        layer,
        str(binary),
        LayerFacts(deleted=frozenset(), opaque=frozenset(), replaced=frozenset(), objects={}),
    )
    (written,) = (tmp_path / "cache" / "audit").iterdir()
    assert auditcache.load_layer(layer, str(binary)) is not None  # the genuine entry is a hit
    written.write_bytes(entry.replace(b"LAYER", layer.encode()))
    assert auditcache.load_layer(layer, str(binary)) is None


# ---------------------------------------------------------------------------------------------
# spec files: -f envbuild.toml

SPEC_BASE = '[stack]\ndriver = "550"\nframework = "torch"\n'
SPEC_SHAPES = [
    ("stack = 5\n", "[stack] must be a table"),
    ('[stack]\ndriver = {a = 1}\nframework = "torch"\n', "[stack] driver = {'a': 1}: expected a string"),
    (SPEC_BASE + '[packages]\npip = "torch"\n', "[packages] pip = 'torch': expected a list of strings"),
    (SPEC_BASE + "[packages]\npip = [[1]]\n", "[packages] pip = [[1]]: expected a list of strings"),
    (SPEC_BASE + '[image]\nlabels = ["a"]\n', "[image] labels = ['a']: expected a table of strings"),
    (
        SPEC_BASE + '[image]\nlabels = {"com.example.a" = []}\n',
        "labels.com.example.a = []: expected a string",
    ),
    (
        SPEC_BASE + f'[image]\nlabels = {{"com.example.a" = "{BIG}"}}\n',
        "1,000,000 characters long, more than the 8,192",
    ),
    (SPEC_BASE + f'[packages]\npip = ["{BIG}"]\n', "pip[0] = 'aaaa"),
    (SPEC_BASE + f'[image]\nrepository = "{BIG}"\n', "more than the 8,192 a field may hold"),
    (SPEC_BASE + f'[image]\nlabels = {{"{BIG}" = "x"}}\n', "more than the 8,192 a field may hold"),
    (SPEC_BASE + f'"{BIG}" = 1\n', "has an unknown key 'aaaa"),
    (SPEC_BASE + f'platform = ["{BIG}"]\n', "platform[0]"),
    (SPEC_BASE + "[smoke]\nimports = 5\n", "[smoke] imports = 5"),
    (
        "[stack]\ndriver = " + "1" * 5000 + "\n",
        "not valid TOML: a value envbuild cannot read (Exceeds the limit",
    ),
    (SPEC_BASE + "[audit]\nskip = [5]\n", "[audit]"),
    (SPEC_BASE + "[[target]]\nname = 5\n", "target"),
]


@pytest.mark.parametrize(("text", "problem"), SPEC_SHAPES, ids=range(len(SPEC_SHAPES)))
def test_a_spec_of_the_wrong_shape_is_exit_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, problem: str
) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(text)
    out = tmp_path / "out"
    code, err = run_cli(capsys, "render", "-f", str(spec), "-o", str(out))
    _clear(code, err, 2, str(spec), problem)
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["envbuild.toml"]
