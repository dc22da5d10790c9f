"""[mirrors] and [site] applied (issue 38): every kind of source rewritten where it is fetched (the
Dockerfile's FROM, pip indexes, the OS step's apt archives, conda's channel) while the plan, the labels
and the lock keep the canonical ones; the lock's [[mirror]] list round-trips and is read strictly; the
spec digest ignores the site tables; [site] matrix and base-image are the defaults of their flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild._util import toml
from envbuild.cli.app import main
from envbuild.errors import LockError
from envbuild.lockfile.model import Lock, LockedMirror, dumps
from envbuild.lockfile.read import lock_from_data, read_lock
from envbuild.matrix.load import load_matrix
from envbuild.plan.aptmirror import apt_mirror_command
from envbuild.plan.plan import build_plan
from envbuild.spec.mirrors import check_entry, make_mirrors
from envbuild.spec.model import load_spec
from tests.helpers.paths import MATRIX_DIR

TORCH = '[stack]\ndriver = "550"\nframework = "torch"\nstrategy = "wheels"\nos = "{os}"\n'
PACKAGES = (
    '\n[packages]\npip = ["tqdm==4.67.1"]\nindex-url = "https://pypi.org/simple"\n'
    'extra-index-urls = ["https://extra.example.org/simple"]\n'
)
MIRRORS = (
    "\n[mirrors]\n"
    '"https://download.pytorch.org/whl" = "https://proxy.internal/pytorch/whl"\n'
    '"https://pypi.org/simple" = "https://proxy.internal/pypi/simple"\n'
    '"https://extra.example.org" = "https://proxy.internal/extra"\n'
    '"docker.io" = "registry.internal/hub"\n'
)
APT = '"http://deb.debian.org/debian" = "https://proxy.internal/debian"\n'
DEBIAN_SED = (
    "RUN for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; "
    'do if [ -f "$f" ]; then sed -i -E -e \'s#https?://deb\\.debian\\.org/debian(/|[[:space:]]|$)'
    '#https://proxy.internal/debian\\1#g\' "$f"; fi; done \\\n && apt-get update \\\n'
)


def _render(tmp_path: Path, text: str, *args: str) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "envbuild.toml"
    spec.write_text(text)
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec), "-o", str(out), *args]) == 0
    return (
        (out / "Dockerfile").read_text()
        if (out / "Dockerfile").exists()
        else next(out.rglob("Dockerfile")).read_text()
    )


def _os_step(dockerfile: str) -> str:
    start = dockerfile.index("# System packages")
    return dockerfile[start : dockerfile.index("rm -rf /var/lib/apt/lists/*", start)]


def test_render_fetches_every_source_through_its_mirror_and_labels_the_canonical(tmp_path: Path) -> None:
    dockerfile = _render(tmp_path, TORCH.format(os="debian12") + PACKAGES + MIRRORS)
    assert "FROM registry.internal/hub/library/debian:bookworm-slim\n" in dockerfile
    assert "--index-url https://proxy.internal/pytorch/whl/cu" in dockerfile  # the matrix variant's index
    assert "--index-url https://proxy.internal/pypi/simple" in dockerfile
    assert "--extra-index-url https://proxy.internal/extra/simple" in dockerfile
    assert "download.pytorch.org" not in dockerfile and "pypi.org" not in dockerfile
    assert (
        'org.opencontainers.image.base.name"="debian:bookworm-slim"' in dockerfile.replace("'", '"')
        or "debian:bookworm-slim" in dockerfile.split("LABEL", 1)[-1]
    )
    assert "apt-get update" in dockerfile and "sed -i" not in dockerfile  # no apt archive mapped


def test_the_plan_keeps_canonical_sources_and_views_them_through_the_mirrors(tmp_path: Path) -> None:
    spec_path = tmp_path / "envbuild.toml"
    spec_path.write_text(TORCH.format(os="debian12") + PACKAGES + MIRRORS)
    spec, matrix = load_spec(str(spec_path)), load_matrix(MATRIX_DIR)
    plan = build_plan(matrix, spec, spec.targets[0])
    assert plan.base_image == "debian:bookworm-slim"
    assert plan.mirrored_base_image == "registry.internal/hub/library/debian:bookworm-slim"
    assert plan.framework_index.startswith("https://download.pytorch.org/whl/")
    assert plan.mirrored_framework_index == plan.framework_index.replace(
        "https://download.pytorch.org/whl", "https://proxy.internal/pytorch/whl"
    )
    assert (plan.index_url, plan.mirrored_index_url) == (
        "https://pypi.org/simple",
        "https://proxy.internal/pypi/simple",
    )
    assert plan.mirrored_extra_index_urls == ("https://proxy.internal/extra/simple",)
    assert plan.stack_document["base_image"] == "debian:bookworm-slim"


def test_the_os_step_goes_through_the_apt_mirror_and_only_an_apt_mirror_changes_it(tmp_path: Path) -> None:
    debian = _render(tmp_path / "a", TORCH.format(os="debian12") + MIRRORS + APT)
    header = "# The OS's apt archives through the site's mirrors ([mirrors] in envbuild.toml).\n"
    assert header + DEBIAN_SED in debian
    plain = _render(tmp_path / "b", TORCH.format(os="debian12"))
    pypi_only = _render(
        tmp_path / "c",
        TORCH.format(os="debian12") + '\n[mirrors]\n"https://pypi.org/simple" = "https://p.internal/s"\n',
    )
    assert _os_step(plain) == _os_step(pypi_only)  # the OS layer's cache survives a PyPI mirror change
    assert "RUN apt-get update \\\n" in plain


def test_ubuntu_archives_security_and_ports_each_rewritten() -> None:
    mirrors = make_mirrors(
        [
            check_entry("http://archive.ubuntu.com/ubuntu", "https://proxy.internal/ubuntu"),
            check_entry("http://security.ubuntu.com", "https://proxy.internal/ubuntu-security"),
            check_entry("http://ports.ubuntu.com/ubuntu-ports", "https://proxy.internal/ports"),
            check_entry("https://pypi.org/simple", "https://proxy.internal/pypi"),
        ]
    )
    command = apt_mirror_command("ubuntu", mirrors)
    assert (
        "-e 's#https?://archive\\.ubuntu\\.com/ubuntu(/|[[:space:]]|$)#https://proxy.internal/ubuntu\\1#g'"
        in command
    )
    assert "#https://proxy.internal/ubuntu-security/ubuntu\\1#g'" in command
    assert (
        "-e 's#https?://ports\\.ubuntu\\.com/ubuntu-ports(/|[[:space:]]|$)#https://proxy.internal/ports\\1#g'"
        in command
    )
    assert "pypi" not in command
    assert apt_mirror_command("debian", mirrors) == ""  # no Debian archive is mapped


def test_conda_channel_and_locked_conda_files_go_through_the_mirror(tmp_path: Path) -> None:
    text = (
        '[stack]\ndriver = "550"\nframework = "torch"\nstrategy = "conda"\n\n[mirrors]\n'
        '"https://conda.anaconda.org/conda-forge" = "https://proxy.internal/conda-forge"\n'
    )
    spec = tmp_path / "envbuild.toml"
    spec.write_text(text)
    out = tmp_path / "out"
    assert main(["render", "-f", str(spec), "-o", str(out)]) == 0
    environment = next(out.rglob("environment.yml")).read_text()
    assert "  - https://proxy.internal/conda-forge\n  - nodefaults\n" in environment


def test_site_base_image_is_the_default_and_a_flag_wins(tmp_path: Path) -> None:
    site = '\n[site]\nbase-image = "registry.internal/base/debian:12"\n'
    assert "FROM registry.internal/base/debian:12\n" in _render(
        tmp_path / "a", TORCH.format(os="debian12") + site
    )
    flagged = _render(tmp_path / "b", TORCH.format(os="debian12") + site, "--base-image", "debian:bookworm")
    assert "FROM debian:bookworm\n" in flagged


def test_a_mirror_name_given_as_base_image_is_recorded_canonical(tmp_path: Path) -> None:
    spec_path = tmp_path / "envbuild.toml"
    spec_path.write_text(TORCH.format(os="debian12") + MIRRORS)
    spec, matrix = load_spec(str(spec_path)), load_matrix(MATRIX_DIR)
    plan = build_plan(matrix, spec, spec.targets[0], base_image="registry.internal/hub/library/debian:12")
    assert plan.base_image == "docker.io/library/debian:12"
    assert plan.mirrored_base_image == "registry.internal/hub/library/debian:12"


def test_site_matrix_is_used_unless_a_flag_or_environment_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    spec = tmp_path / "envbuild.toml"
    spec.write_text(TORCH.format(os="debian12") + '\n[site]\nmatrix = "team-matrix"\n')
    monkeypatch.delenv("ENVBUILD_MATRIX", raising=False)
    assert main(["resolve", "-f", str(spec)]) != 0
    assert str(tmp_path / "team-matrix") in capsys.readouterr().err  # the spec's own, relative to it
    assert main(["resolve", "-f", str(spec), "--matrix", str(MATRIX_DIR)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("ENVBUILD_MATRIX", str(MATRIX_DIR))
    assert main(["resolve", "-f", str(spec)]) == 0
    monkeypatch.delenv("ENVBUILD_MATRIX")
    import shutil

    shutil.copytree(MATRIX_DIR, tmp_path / "team-matrix")
    assert main(["resolve", "-f", str(spec)]) == 0
    assert main(["render", "-f", str(spec), "-o", str(tmp_path / "out")]) == 0


def test_spec_digest_ignores_the_site_tables(tmp_path: Path) -> None:
    plain = TORCH.format(os="debian12") + PACKAGES
    (tmp_path / "a.toml").write_text(plain)
    (tmp_path / "b.toml").write_text(plain + MIRRORS + '\n[site]\nbase-image = "debian:12"\n')
    (tmp_path / "c.toml").write_text(TORCH.format(os="debian12") + "\n# where we fetch" + MIRRORS + PACKAGES)
    digests = [load_spec(str(tmp_path / f"{n}.toml")).digest for n in "abc"]
    assert digests[0] == digests[1] == digests[2]
    import hashlib

    assert digests[0] == hashlib.sha256(plain.encode()).hexdigest()  # a spec without them: as before


def _lock(mirrors: tuple[LockedMirror, ...]) -> Lock:
    return Lock(envbuild="1.0", spec_digest="a" * 64, matrix_digest="b" * 64, targets=(), mirrors=mirrors)


def test_the_lock_mirror_list_round_trips_and_is_absent_without_mirrors() -> None:
    assert "mirror" not in dumps(_lock(()))
    entries = (
        LockedMirror(source="docker.io", mirror="registry.internal/hub"),
        LockedMirror(source="https://pypi.org/simple", mirror="http://127.0.0.1:8080/simple"),
    )
    text = dumps(_lock(entries))
    assert '\n[[mirror]]\nsource = "docker.io"\nmirror = "registry.internal/hub"\n' in text
    data = toml.loads(text)
    data["target"] = []
    assert lock_from_data(data)[0].mirrors == entries


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ('source = "https://pypi.org/simple"\nmirror = "https://u:p@proxy/simple"', "credentials"),
        ('source = "https://pypi.org/simple"\nmirror = "registry.internal/x"', "one kind"),
        ('source = 1\nmirror = "https://proxy/simple"', "expected a string"),
        ('source = "https://pypi.org/simple"', "missing 'mirror'"),
        ('source = "https://pypi.org/simple"\nmirror = "https://p/s"\nextra = "x"', "unknown key"),
        ('source = "https://pypi.org/simple/"\nmirror = "https://p/s"', "form envbuild writes"),
    ],
)
def test_the_reader_refuses_a_malformed_mirror(tmp_path: Path, entry: str, says: str) -> None:
    text = dumps(_lock(())).replace("lock-version", "target = []\nlock-version", 1)
    path = tmp_path / "envbuild.lock"
    path.write_text(text + f"\n[[mirror]]\n{entry}\n")
    with pytest.raises(LockError, match="mirror") as caught:
        read_lock(str(path))
    assert says in caught.value.message
