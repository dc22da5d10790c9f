"""GPU names: one key per GPU, however a user types it or nvidia-smi prints it.

nvidia-smi names one A100 "NVIDIA A100-SXM4-80GB", another "NVIDIA A100 80GB PCIe"; a user types
"A100" or "a100 sxm". They are one row of gpus.toml, so a name's *key* keeps only what tells GPUs
apart (series and model number: "rtx3060", "a100", "rtx6000ada") and drops what does not change the
compute capability, architecture or driver floors:

* vendor and brand prefixes: NVIDIA, GeForce, Tesla, Quadro ("Quadro RTX 8000" -> "rtx8000");
* memory sizes ("80GB", "16 GB", GH200's "144G") and memory types (HBM2, HBM2e, HBM3, HBM3e,
  GDDR5/5X/6/6X/7): one model sold with more memory is the same GPU to a CUDA build;
* form factors (SXM, SXM2..SXM6, PCIe, NVL, NVL72): the board, not the chip;
* the word "Generation" ("RTX 4000 Ada Generation" -> "rtx4000ada");
* a MIG suffix ("... MIG 1g.5gb"): a slice of the GPU named before it;
* punctuation, spaces, dashes and case.

What stays keeps look-alikes apart: "RTX 6000" (Quadro, Turing), "RTX 6000 Ada Generation" and
"RTX PRO 6000 Blackwell" are "rtx6000", "rtx6000ada" and "rtxpro6000blackwell"; "A10", "A10G" and
"A100" differ in their model word, and "H1000" is not "H100" (keys are compared whole).

Some words name a variant the catalogue may or may not list as its own row: "Laptop GPU", "with
Max-Q Design", "Mobile", "Max-Q", "Server Edition", "Workstation Edition". They are *soft*: a name
is looked up with them first (a row that keeps them wins), and only then without them
(`loose_key`). So "NVIDIA GeForce RTX 4090 Laptop GPU" finds a "RTX 4090 Laptop GPU" row where the
catalogue has one, else the RTX 4090 row: a notebook part has the compute capability of the desktop
part of the same name (NVIDIA's CUDA GPUs page lists them side by side), which is what envbuild
judges a GPU by.

Nothing here reads the matrix: envbuild.matrix.model indexes the rows by these keys.
"""

from __future__ import annotations

import re

from envbuild._util.record import Record
from envbuild.preflight.programs.envbuild_preflight import (
    SOFT_PHRASES,
    VENDOR_PREFIXES,
    loose_key,
    name_key,
    name_tokens,
    without_soft,
)

__all__ = [
    "SOFT_PHRASES",
    "VENDOR_PREFIXES",
    "ModelNumber",
    "loose_key",
    "model_number",
    "name_key",
    "name_tokens",
    "similar_names",
]

# The keys themselves are the preflight guard's (it runs inside images, so it keeps to the standard
# library and imports no `re`): one definition, so resolve and an image's guard place a GPU alike.
_without_soft = without_soft


# ---------------------------------------------------------------------------------------------
# model numbers, for suggesting rows for a name the catalogue lacks

_MODEL_WORD = re.compile(r"([a-z]*)(\d+)([a-z]*)")
_GEFORCE_SERIES = ("gtx", "rtx", "gt")


class ModelNumber(Record):
    """A name read as series + number + suffix: "GTX 1080 Ti" is ("gtx", 1080, "ti"), "RTX A5000"
    ("rtxa", 5000, ""), "H100" ("h", 100, ""), "L40S" ("l", 40, "s")."""

    __slots__ = ("family", "number", "digits", "suffix")
    family: str  # the series words and the letters before the number
    number: int
    digits: str  # the number as written: "1000" starts with "100" (a typo's likely target)
    suffix: str  # letters after the number and the words after it ("ti", "super", "ada")


def model_number(text: str) -> ModelNumber | None:
    """The model number of a name, or None for a name without one ("Jetson Thor", "Titan X")."""
    tokens = _without_soft(name_tokens(text))
    for i, word in enumerate(tokens):
        match = _MODEL_WORD.fullmatch(word)
        if match:
            letters, digits, tail = match.groups()
            return ModelNumber(
                family="".join(tokens[:i]) + letters,
                number=int(digits),
                digits=digits,
                suffix=tail + "".join(tokens[i + 1 :]),
            )
    return None


def similar_names(text: str, names: list[str], *, limit: int = 3) -> list[str]:
    """Catalogue names that are plausibly what `text` meant, nearest first: the same series and a
    model number of the same length (or one a digit too long or short: "H1000" -> H100), by how near
    the number is, the same suffix first ("GTX 1085 Ti" -> GTX 1080 Ti, GTX 1080, GTX 1070 Ti); for
    GeForce, of the same generation (the number's first digit).

    A name of another series is never suggested for its shared digits: "GTX 1080 Ti" is a Pascal
    card, and RTX 3080/4080/5080 (what a character-similarity match offered) are three other
    architectures. A name without a model number falls back to close spelling."""
    wanted = model_number(text)
    if wanted is None:
        import difflib

        keys = {name_key(n): n for n in names}
        close = difflib.get_close_matches(name_key(text), list(keys), n=limit, cutoff=0.75)
        return [keys[k] for k in close]
    scored = []
    for name in names:
        have = model_number(name)
        if have is None or have.family != wanted.family:
            continue
        if len(have.digits) == len(wanted.digits):
            # a GeForce number leads with its generation (GTX 1080, RTX 3080, RTX 5080): another
            # generation is another architecture, not a neighbour
            if wanted.family in _GEFORCE_SERIES and have.digits[0] != wanted.digits[0]:
                continue
            distance = abs(have.number - wanted.number)
        elif have.digits.startswith(wanted.digits) or wanted.digits.startswith(have.digits):
            distance = 10 ** len(wanted.digits)  # a digit too many or too few: after the neighbours
        else:
            continue
        scored.append((distance, have.suffix != wanted.suffix, name))
    return [name for _, _, name in sorted(scored)[:limit]]
