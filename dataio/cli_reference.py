"""The CLI reference page, ``docs/cli.md``, written from the parser of the ``dataio/cli/`` package.

``python -m dataio.cli_reference`` rewrites the page (run it from the repository root after changing a flag);
``tests/test_docs.py`` renders it in memory and fails while the committed page differs. Every command gets its
usage line and a table of its arguments: the flag and its value, the default, and the help text as ``--help``
prints it (without the ``(default: X)`` it appends, which has its own column).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from dataio.cli import _parser
from dataio.formats.file_gate import write_atomic

PAGE = Path("docs/cli.md")
COMMAND = "python -m dataio.cli_reference"
WIDTH = 100  # usage lines are wrapped at this width whatever the terminal, so the page is the same everywhere

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "*": "\\*", "_": "\\_",
                          "`": "\\`", "[": "\\[", "]": "\\]"})


def _text(value: str) -> str:
    """Plain text in a Markdown table cell: nothing in it read as markup (``<hash of OUT>`` is not HTML)."""
    return " ".join(value.split()).translate(_ESCAPES)


def _code(value: str) -> str:
    """Inline code in a table cell (a ``|`` escaped for the table, as Python-Markdown's tables expect)."""
    return "`" + value.replace("|", "\\|") + "`"


def walk(parser: argparse.ArgumentParser, summary: str = "") -> Iterator[tuple[argparse.ArgumentParser, str]]:
    """``parser`` and every subcommand's parser below it, depth first in the order they were added."""
    yield parser, summary
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield from walk(sub, helps.get(name, ""))


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.help != argparse.SUPPRESS
            and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def _default(action: argparse.Action) -> str:
    if isinstance(action, argparse._VersionAction):
        return "–"
    if action.required or (not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)):
        return "required"
    if action.nargs == 0:
        return "off"
    if action.default is None:
        return "–"  # the help says what happens
    return _code(str(action.default))


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = parser.formatter_class(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole page, from ``parser`` (default: the ``dataio`` command's)."""
    parser = parser or _parser()
    plain = argparse.HelpFormatter(prog=parser.prog, width=WIDTH)  # the help text without the appended default
    lines = ["# CLI reference", "",
             f"Generated from the parsers in `dataio/cli/` by `{COMMAND}`: do not edit it by hand. Every command "
             "prints the same with `--help`, its defaults included; `dataio --version` prints the version.", ""]
    for sub, summary in walk(parser):
        subcommands = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        lines += [f"## `{sub.prog}`", ""]
        if summary or sub.description:
            text = (summary or sub.description).rstrip(".")
            lines += [text[0].upper() + text[1:] + ".", ""]
        lines += ["```text", _usage(sub), "```", ""]
        if subcommands:
            names = ", ".join(f"`{sub.prog} {name}`" for name in subcommands[0].choices)
            lines += [f"Commands: {names}.", ""]
        arguments = _arguments(sub)
        if arguments:
            lines += ["| argument | default | description |", "|---|---|---|"]
            for action in arguments:
                invocation = plain._format_action_invocation(action)
                description = _text(plain._expand_help(action)) if action.help else ""
                lines.append(f"| {_code(invocation)} | {_default(action)} | {description} |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write the page to PATH (default ``docs/cli.md``, from the repository root)."""
    args = argv if argv is not None else sys.argv[1:]
    path = Path(args[0]) if args else PAGE
    write_atomic(path, render().encode())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
