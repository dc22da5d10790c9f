"""reference/cli.md: every command and subcommand, its usage and its options, from the argument parser.

The page is read off the parser `envbuild` itself runs (envbuild.cli.parser, every command's
arguments filled in), so a flag added there is on the page at the next build, with the same help
text `envbuild COMMAND --help` prints. Usage lines are formatted at a fixed width: the terminal the
site is built in must not change its bytes.
"""

from __future__ import annotations

import argparse

from docsgen import markdown as md

USAGE_WIDTH = 96  # characters: a usage line fits the page's code block without a scroll bar


class CommandDoc:
    """One command as the page shows it: its path ("ci github"), parser and one-line help."""

    __slots__ = ("path", "parser", "summary")

    def __init__(self, path: str, parser: argparse.ArgumentParser, summary: str) -> None:
        self.path = path
        self.parser = parser
        self.summary = summary

    @property
    def title(self) -> str:
        return f"envbuild {self.path}".strip()

    @property
    def is_group(self) -> bool:
        return subcommands_action(self.parser) is not None

    @property
    def depth(self) -> int:
        return len(self.path.split()) if self.path else 0


def subcommands_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def walk(parser: argparse.ArgumentParser, path: str = "", summary: str = "") -> list[CommandDoc]:
    """The parser and every (sub)command under it, depth first in the order `--help` lists them."""
    found = [CommandDoc(path, parser, summary)]
    action = subcommands_action(parser)
    if action is not None:
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, child in action.choices.items():
            found += walk(child, f"{path} {name}".strip(), helps.get(name, ""))
    return found


def all_commands() -> list[CommandDoc]:
    """`envbuild` and every command and subcommand, each parser with all of its arguments."""
    from envbuild.cli.parser import build_parser

    parser, _ = build_parser(every=True)
    return walk(parser)


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a reader passes: positionals and options, not -h/--help nor a subcommand."""
    return [
        action
        for action in parser._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        and action.help != argparse.SUPPRESS
    ]


def value_of(action: argparse.Action) -> str:
    """What follows the flag, as argparse writes it in a usage line (`SPEC`, `[PKG ...]`); empty for a
    switch."""
    if action.nargs == 0 or (action.choices and action.metavar is None):
        return ""  # a switch; or one of the choices, which their own column lists
    formatter = argparse.HelpFormatter("envbuild")
    default = action.dest if not action.option_strings else action.dest.upper()
    return formatter._format_args(action, default)


def default_of(action: argparse.Action) -> str:
    if action.required:
        return "required"
    value = action.default
    if value is None or value is argparse.SUPPRESS or value in ([], ()) or action.nargs == 0:
        return ""
    return md.code(value)


def help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help `--help` prints (its %(default)s expanded), and what the parser enforces beside it:
    repeatable, and the options it cannot be given with."""
    formatter = argparse.HelpFormatter(parser.prog)
    parts = [md.text(formatter._expand_help(action))] if action.help else []
    repeatable = isinstance(action, (argparse._AppendAction, argparse._ExtendAction))
    if repeatable and "repeatable" not in (action.help or "").lower():
        parts.append("Repeatable.")
    for group in parser._mutually_exclusive_groups:
        if action in group._group_actions:
            others = [a for a in group._group_actions if a is not action]
            parts.append("Not with " + ", ".join(md.code(name_of(a)) for a in others) + ".")
    return " ".join(parts)


def name_of(action: argparse.Action) -> str:
    return (
        max(action.option_strings, key=len) if action.option_strings else str(action.metavar or action.dest)
    )


def options_table(command: CommandDoc) -> str:
    rows = []
    for action in documented_actions(command.parser):
        names = md.codes(action.option_strings) if action.option_strings else md.code(name_of(action))
        value = value_of(action)
        if not action.option_strings and value == name_of(action):
            value = ""  # a positional's value is its name, in the first column already
        choices = md.codes(action.choices) if action.choices else ""
        rows.append(
            (
                names,
                md.code(value) if value else "",
                default_of(action),
                choices,
                help_of(command.parser, action),
            )
        )
    if not rows:
        return ""
    return md.table(("option", "value", "default", "choices", "what it does"), rows)


def section(command: CommandDoc) -> str:
    level = "#" * max(command.depth + 1, 2)
    out = [f"{level} {command.title}", ""]
    if command.parser.description:
        out += [md.text(command.parser.description), ""]
    elif command.summary:
        out += [md.text(command.summary[0].upper() + command.summary[1:]) + ".", ""]
    out += ["```text", usage(command.parser), "```", ""]
    if command.is_group and command.depth:
        action = subcommands_action(command.parser)
        assert action is not None
        items = [
            f"- [{md.code(command.title + ' ' + name)}](#{md.anchor(command.title + ' ' + name)}): "
            + md.text(choice.help or "")
            for name, choice in zip(action.choices, action._choices_actions, strict=True)
        ]
        out += ["Its subcommands:", "", *items, ""]
    table = options_table(command)
    if table:
        out += [table]
    return "\n".join(out)


def page() -> str:
    commands = all_commands()
    top, rest = commands[0], commands[1:]
    overview = md.table(
        ("command", "what it does"),
        [(f"[{md.code(c.title)}](#{md.anchor(c.title)})", md.text(c.summary)) for c in rest],
    )
    intro = (
        "# Commands\n\n"
        "Every `envbuild` command and subcommand with its usage and options, generated from the argument "
        "parser the tool runs (`envbuild/cli/parser.py`) each time this site is built. `envbuild COMMAND "
        "--help` prints the same help. A flag given twice where the table says *Repeatable* adds to the "
        "list; an empty default means the option is not set unless given. Exit codes are listed on "
        "[Exit codes](exit-codes.md), the variables that stand in for flags on "
        "[Environment variables](environment.md).\n\n"
    )
    out = [intro + overview, *(section(command) for command in (top, *rest))]
    return "\n".join(out)
