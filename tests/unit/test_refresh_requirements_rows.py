"""The pure parts of `matrix refresh --requirements`: which Requires-Dist lines count, how a
specifier is spelled, and how a wheel is cited (the loopback tests cover the whole refresh)."""

from __future__ import annotations

from envbuild.refresh.requirements import applicable, cited_url, cuda_family, order_specifier

HASH = "4a382ec14e57d774148b079c3d251fc9b9e1ed7f92dd2327823f35e0a968a7"[:60]
TORCH_LINES = [
    'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "aarch64"',
    'triton==3.4.0; platform_system == "Linux" and platform_machine == "x86_64"',
    'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"',
    "tensorrt==8.5.3.1; extra == 'and-cuda'",
    "opt-einsum>=3.3; extra == 'opt-einsum'",
]


def test_only_cuda_family_requirements_for_linux_x86_64_and_the_extra_count() -> None:
    requires = cuda_family(applicable(TORCH_LINES, "3.11", ""))
    assert requires == {
        "cuda-bindings": ">=13.0.3,<14",
        "nvidia-cuda-runtime-cu12": "==12.8.90",
        "nvidia-cudnn-cu12": "==9.10.2.21",
    }
    assert "cuda-bindings" not in cuda_family(applicable(TORCH_LINES, "3.15", ""))
    with_extra = cuda_family(applicable(TORCH_LINES, "3.11", "and-cuda"))
    assert with_extra["tensorrt"] == "==8.5.3.1" and "nvidia-cudnn-cu12" in with_extra


def test_an_old_style_underscore_extra_matches_its_normalized_name() -> None:
    lines = ["nvidia-cudnn-cu12 <10.0,>=9.1 ; extra == 'with_cuda'", "jax-cuda12-pjrt ==0.4.31"]
    assert cuda_family(applicable(lines, "3.11", "with-cuda")) == {"nvidia-cudnn-cu12": ">=9.1,<10.0"}
    assert cuda_family(applicable(lines, "3.11", "")) == {}


def test_specifiers_are_spelled_lower_bound_first() -> None:
    assert order_specifier("<10.0,>=9.8") == ">=9.8,<10.0"
    assert order_specifier("!=12.4.0, <13, >=12.1") == ">=12.1,<13,!=12.4.0"
    assert order_specifier("") == ""


def test_a_mirrored_pypi_file_is_cited_on_pypis_file_host() -> None:
    mirrored = f"https://pypi.org/packages/packages/94/4a/{HASH}/jax_cuda12_plugin-0.10.2-cp311-x.whl"
    assert (
        cited_url(mirrored)
        == f"https://files.pythonhosted.org/packages/94/4a/{HASH}/jax_cuda12_plugin-0.10.2-cp311-x.whl"
    )
    assert cited_url("http://127.0.0.1:8080/files/torch-2.14.1-cp311.whl") == (
        "http://127.0.0.1:8080/files/torch-2.14.1-cp311.whl"
    )
