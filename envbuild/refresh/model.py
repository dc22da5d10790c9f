"""What a refresh reports: findings, and the text edits `--write` applies for them.

Three kinds, from most to least certain:
  add     a fact read upstream that fits an existing row exactly (a patch release, a deleted tag,
          a new nvidia/cuda tag set of a CUDA release drivers.toml knows); `--write` writes it.
  review  a new row with at least one fact no upstream source can give (a framework's arch list);
          `--write` adds it as a commented-out block for a human to finish and uncomment.
  flag    something surprising or missing (a CUDA variant without a known driver floor, a row that
          disagrees with upstream); reported only, never guessed.
"""

from __future__ import annotations

from envbuild._util.record import Record

ACTIONS = ("add", "review", "flag")
PROPOSAL_MARKER = "# envbuild-refresh: proposed"


class Edit(Record):
    """One text edit of a matrix file.

    kind: append-version  anchor: a version already in the row; text: the version to add
          set-key         anchor: the image row's cuda ("12.4.1"); text: the key line to add
          append-block    anchor: ""; text: TOML (rows or a commented proposal) appended to the file
          replace-file    anchor: ""; text: the whole new file (a generated file: requirements.toml)
          set-variant     anchor: "FIRST-VERSION VARIANT" of a [[release.variant]]; text: one
                          `key = value` line per key to set, or `-key` to drop the key
    """

    __slots__ = ("kind", "anchor", "text")
    kind: str
    anchor: str
    text: str


class Finding(Record):
    __slots__ = ("action", "file", "subject", "detail", "source", "fetched", "edit")
    action: str  # add | review | flag
    file: str  # path relative to the matrix directory
    subject: str  # "torch 2.15.1", "nvidia/cuda 12.4.1"
    detail: str  # one or more lines for a human
    source: str  # the URL the fact was read from
    fetched: str  # YYYY-MM-DD
    edit: Edit | None

    def to_json(self) -> dict[str, object]:
        return {
            "action": self.action,
            "file": self.file,
            "subject": self.subject,
            "detail": self.detail,
            "source": self.source,
            "fetched": self.fetched,
            "edit": (
                {"kind": self.edit.kind, "anchor": self.edit.anchor, "text": self.edit.text}
                if self.edit
                else None
            ),
        }


def toml_string(value: str) -> str:
    """A TOML basic string; matrix values are plain text, so escaping quotes and backslashes is enough."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join(toml_string(v) for v in values) + "]"
