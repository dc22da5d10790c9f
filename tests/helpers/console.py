"""The `console` blocks of a docs page, read as the commands a reader types and the output the page
promises, so a test can run the commands and hold the page to what they print.

The page's conventions (docs/getting-started.md follows them; tests/unit/test_console_blocks.py pins
them):

- A fenced block opened with ```` ```console ```` holds commands and their output. A line starting
  with `$ ` is a command; the lines after it, up to the next command or the block's end, are what it
  prints (stdout and stderr together, as a terminal shows them).
- A command continues on the next line when its line ends with a backslash, and a heredoc
  (`cat > envbuild.toml <<'EOF'`) takes every line up to its delimiter as part of the command, so the
  file it writes is exactly the page's text.
- A command that exits non-zero on purpose says so at the end of its first line, `# exit 3`, a comment
  bash ignores; every other command must exit 0.
- In the output, a line that is exactly `...` stands for any number of lines (none included), and `…`
  inside a line for any text within that line: times, ids, digests, paths. Everything else must match
  exactly (trailing spaces and trailing blank lines aside).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from envbuild._util.record import Record

ANY_LINES = "..."
ANY_TEXT = "…"
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\S*)")
_EXIT = re.compile(r"\s#\s*exit\s+(\d+)\s*$")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


class ConsoleCommand(Record):
    """One `$ ` command of a page: the text bash runs, what it must print and its exit status."""

    __slots__ = ("text", "output", "exit_code", "line")

    text: str
    output: tuple[str, ...]
    exit_code: int
    line: int  # the page's line number of the `$ ` line, for error messages


def fenced_blocks(markdown: str) -> list[tuple[int, str, list[str]]]:
    """Each fenced block as (page line number of its first body line, language, body lines)."""
    blocks: list[tuple[int, str, list[str]]] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index].lstrip())
        if not opening:
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2)
        body_start = index + 1
        index = body_start
        while index < len(lines) and not lines[index].lstrip().startswith(fence):
            index += 1
        blocks.append((body_start + 1, language, lines[body_start:index]))
        index += 1
    return blocks


def blocks_with_untested_prompts(markdown: str) -> list[tuple[int, str]]:
    """(line, language) of every fenced block that is not a console block but has a `$ ` line: a
    command written as if typed, which no test would run."""
    return [
        (line, language)
        for line, language, body in fenced_blocks(markdown)
        if language != "console" and any(text.startswith("$ ") for text in body)
    ]


def commands(markdown: str) -> list[ConsoleCommand]:
    """Every command of the page's console blocks, in page order."""
    found: list[ConsoleCommand] = []
    for first_line, language, block in fenced_blocks(markdown):
        if language != "console":
            continue
        index = 0
        while index < len(block):
            line = block[index]
            if not line.startswith("$ "):
                if line.strip() and (not found or found[-1].line < first_line):
                    raise ValueError(f"line {first_line + index}: output before any `$ ` command: {line!r}")
                index += 1
                continue
            start = index
            text_lines = [line[2:]]
            index += 1
            while text_lines[-1].endswith("\\") and index < len(block):
                text_lines.append(block[index])
                index += 1
            heredoc = _HEREDOC.search(" ".join(text_lines))
            if heredoc:
                strip_tabs, delimiter = heredoc.group(1) == "-", heredoc.group(3)
                while index < len(block):
                    body = block[index]
                    text_lines.append(body)
                    index += 1
                    if (body.lstrip("\t") if strip_tabs else body) == delimiter:
                        break
                else:
                    raise ValueError(f"line {first_line + start}: heredoc {delimiter} is never closed")
            output_start = index
            while index < len(block) and not block[index].startswith("$ "):
                index += 1
            exit_code = _EXIT.search(text_lines[0])
            found.append(
                ConsoleCommand(
                    text="\n".join(text_lines),
                    output=tuple(block[output_start:index]),
                    exit_code=int(exit_code.group(1)) if exit_code else 0,
                    line=first_line + start,
                )
            )
    return found


def _trimmed(lines: list[str] | tuple[str, ...]) -> list[str]:
    kept = [line.rstrip() for line in lines]
    while kept and not kept[-1]:
        kept.pop()
    return kept


def _line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in expected.split(ANY_TEXT)), re.DOTALL)


def mismatch(expected: tuple[str, ...] | list[str], actual: str) -> str | None:
    """None when `actual` (a command's whole output) is what `expected` (the page's lines) allows;
    else a message naming the first page line no reading of the output could match."""
    want, got = _trimmed(expected), _trimmed(actual.splitlines())
    patterns = [None if line == ANY_LINES else _line_pattern(line) for line in want]
    # reachable[i] = the output positions at which page line i can start; `...` lets a line start later
    reachable: list[set[int]] = [set() for _ in range(len(want) + 1)]
    reachable[0].add(0)
    furthest = 0
    for i, pattern in enumerate(patterns):
        if reachable[i]:
            furthest = i
        for j in sorted(reachable[i]):
            if pattern is None:
                reachable[i + 1].update(range(j, len(got) + 1))
            elif j < len(got) and pattern.fullmatch(got[j]):
                reachable[i + 1].add(j + 1)
    if len(got) in reachable[len(want)]:
        return None
    if reachable[len(want)]:
        extra = got[max(reachable[len(want)]) :]
        return "the output goes on past the page's last line:\n" + "\n".join(f"  + {x}" for x in extra[:10])
    starts = sorted(reachable[furthest])
    near = got[starts[0] : starts[0] + 5] if starts and starts[0] < len(got) else []
    return (
        f"no output line matches the page's line {furthest + 1}, {want[furthest]!r}; "
        "the output there reads:\n" + ("\n".join(f"  | {x}" for x in near) or "  (the output ended)")
    )


def run(command: ConsoleCommand, cwd: Path, env: dict[str, str], timeout: float = 600) -> str | None:
    """Run one command with bash in `cwd`, stdout and stderr in one pipe as a terminal shows them; None
    when its exit status and output are the page's, else what differs, naming the page line."""
    done = subprocess.run(
        ["bash", "-c", command.text],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    where = f"line {command.line}: `{command.text.splitlines()[0]}`"
    if done.returncode != command.exit_code:
        return (
            f"{where} exited {done.returncode}, the page says {command.exit_code} "
            f"(a command that fails on purpose ends its line with `# exit N`); it printed:\n{done.stdout}"
        )
    problem = mismatch(command.output, done.stdout)
    return None if problem is None else f"{where}: {problem}\nits whole output:\n{done.stdout}"
