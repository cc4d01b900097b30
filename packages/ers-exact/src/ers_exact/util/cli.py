"""The command-line contract shared by ``ers-exact`` and ``ers-deep``.

Each subcommand is a :class:`Command`: its :class:`~ers_exact.util.options.Options` class (flags, defaults,
help, validation) and a ``run(options) -> dict`` callable that tests call without a subprocess.
:func:`run_cli` parses, validates, runs and prints (a summary, or JSON with ``--json``).

Every invalid input ends the same way: exit status 2 and ONE line on stderr,
``PROG CMD: error: <what was wrong, naming the value, and what would be valid>``, never a traceback.
User errors are the exception types listed in ``user_errors``: by default every error marked
:class:`~ers_exact.util.errors.InputError` (options, games, files, policies, budgets) and ``OSError``.
Anything else is a bug, never blamed on the user: exit 1 with one line asking for a report;
``ERS_DEBUG=1`` shows the traceback.

Output streams: ``--json`` is strict JSON (``null`` where a value is undefined or not finite); a reader that
closes the pipe early (``| head``) ends the command quietly with status 141 (128 + SIGPIPE); a device that
cannot take the output (``> /dev/full``) is exit status 2 with one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ers_exact.util.errors import InputError
from ers_exact.util.options import Options, add_options, flag_name, from_namespace, options_markdown
from ers_exact.util.output import dumps

__all__ = [
    "Command",
    "OneLineParser",
    "build_parser",
    "commands_markdown",
    "one_line",
    "run_cli",
    "script_parser",
]

USAGE_ERROR = 2
INTERNAL_ERROR = 1
CLOSED_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader closed the pipe


def one_line(message: object) -> str:
    """A message flattened to one line (multi-line reasons joined with '; ')."""
    parts = [p.strip() for p in str(message).splitlines() if p.strip()]
    return "; ".join(parts) or type(message).__name__


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line ``PROG: error: ...`` and exit status 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def script_parser(prog: str | None = None, description: str | None = None) -> argparse.ArgumentParser:
    """The parser of a standalone command line (``python -m ers_deep.bench.MODULE``, ``scripts/*.py``; not one
    of the two CLIs): argparse's, with abbreviated flags refused as the CLIs refuse them (``allow_abbrev=False``,
    :func:`build_parser`), so ``--num-env 8`` is an unrecognized argument, not ``--num-envs 8``."""
    return argparse.ArgumentParser(prog=prog, description=description, allow_abbrev=False)


@dataclass(frozen=True)
class Command:
    """One subcommand: name, one-line help, its options class, the run function and a text printer."""

    name: str
    help: str
    options: type[Options]
    run: Callable[[Any], dict[str, Any]]
    show: Callable[[dict[str, Any]], None] | None = None


def build_parser(prog: str, description: str, version: str, commands: Sequence[Command]) -> OneLineParser:
    """The parser: one subparser per command, flags from its options class, plus ``--json``.

    Abbreviated flags are refused (``allow_abbrev=False`` on every parser): argparse would otherwise read
    ``--start 4`` as ``--starts 4``, or a prefix of a deprecated alias as the option it names, silently; an
    abbreviation is an unknown option, a usage error of its command (see :func:`run_cli`)."""
    p = OneLineParser(prog=prog, description=description, allow_abbrev=False)
    p.add_argument("--version", action="version", version=f"{prog} {version}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineParser)
    for c in commands:
        sp = sub.add_parser(c.name, help=c.help, description=c.help, allow_abbrev=False)
        add_options(sp, c.options)
        sp.add_argument("--json", action="store_true", help="print the result as JSON instead of a summary")
    return p


def _default_show(result: dict[str, Any]) -> None:
    for k, v in result.items():
        print(f"{k}: {v}")


def with_flags(message: str, options: type[Options]) -> str:
    """``message`` with every library parameter that is one of the command's options (a name with an
    underscore, e.g. ``max_nodes``) written as the command's flag (``--max-nodes``): a budget refusal names the
    option that raises it."""
    names = [
        f.name for f in dataclasses.fields(options) if "_" in f.name and not f.metadata.get("positional")
    ]
    if not names:
        return message
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    return pattern.sub(lambda m: flag_name(m.group(1)), message)


def run_cli(
    prog: str,
    description: str,
    version: str,
    commands: Sequence[Command],
    argv: Sequence[str] | None = None,
    *,
    user_errors: tuple[type[BaseException], ...] = (InputError, OSError),
) -> int:
    """Parse ``argv``, validate, run the command and print; returns the exit status (see module doc)."""
    table = {c.name: c for c in commands}
    parser = build_parser(prog, description, version, commands)
    args, extra = parser.parse_known_args(argv)
    cmd = table[args.command]
    where = f"{prog} {cmd.name}"
    if (
        extra
    ):  # named by whichever parser they were given to: the program's (before the command) or the command's
        given = list(sys.argv[1:] if argv is None else argv)
        before = set(given[: given.index(cmd.name)]) if cmd.name in given else set()
        OneLineParser(prog=prog if before & set(extra) else where).error(
            f"unrecognized arguments: {' '.join(extra)}"
        )
    try:
        result = cmd.run(from_namespace(cmd.options, args))
    except BrokenPipeError:
        return _closed_stdout()
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except user_errors as err:
        print(f"{where}: error: {with_flags(one_line(err), cmd.options)}", file=sys.stderr)
        return USAGE_ERROR
    except Exception as err:  # a bug, not bad input: say so in one line unless debugging
        if os.environ.get("ERS_DEBUG"):
            raise
        print(
            f"{where}: internal error: {type(err).__name__}: {one_line(err)} "
            f"(please report it; ERS_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return INTERNAL_ERROR
    return _print_result(where, result, args.json, cmd.show or _default_show)


def _print_result(where: str, result: dict[str, Any], as_json: bool, show: Callable[[Any], None]) -> int:
    """Print the result (strict JSON: ``null`` where a value is undefined or not finite, never ``NaN``);
    a reader that closed the pipe ends the command quietly, a full device is exit status 2 with one line."""
    try:
        if as_json:
            print(dumps(result, indent=2))
        else:
            show(result)
        sys.stdout.flush()
    except BrokenPipeError:
        return _closed_stdout()
    except OSError as err:
        _silence_stdout()
        print(f"{where}: error: cannot write the output: {err.strerror or err}", file=sys.stderr)
        return USAGE_ERROR
    return 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail (and print) again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (captured in tests)
        pass


def _closed_stdout() -> int:
    """The reader of stdout went away (``| head``): stop quietly, with the shell's status for SIGPIPE."""
    _silence_stdout()
    return CLOSED_PIPE


def commands_markdown(prog: str, commands: Sequence[Command]) -> str:
    """Every command's options as markdown tables under ``#### PROG CMD`` headings (the README's tables)."""
    parts = []
    for cmd in commands:
        parts.append(f"#### {prog} {cmd.name}\n\n{cmd.help}.\n")
        if dataclasses.fields(cmd.options):
            parts.append(options_markdown(cmd.options) + "\n")
        else:
            parts.append("No options besides `--json`.\n")
    return "\n".join(parts)
