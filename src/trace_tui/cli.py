"""Command line: `trace-tui` (the TUI), `trace-tui --recipe NAME` (a run), and subcommands.

Each subcommand lives in ``trace_tui.commands.<module>`` with two functions,
``add_arguments(parser)`` and ``run(args) -> int``. Command modules import only
the standard library at top level so that building the parser (and so
``trace-tui --help``) stays fast; the work they do imports what it needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from trace_tui import __version__
from trace_tui.commands.arguments import MAX_PARALLEL, add_recipe_selection, non_empty, short, teardown_skippable
from trace_tui.common.runtimes import RUNTIME_NAMES
from trace_tui.errors import ExitCode, TraceTuiError, UsageError, os_error_line, printable
from trace_tui.logs import redact_text

# name -> one line of help
COMMANDS: dict[str, str] = {
    "images": "build, check, push and pull the pinned stage images",
    "hw": "hardware check: GPUs (NVML), Docker, images, disk, and each recipe step's verdict",
    "recipes": "every recipe with its purpose and its status on this host",
    "preview": "configuration-only preview of a recipe: starts nothing, writes nothing",
    "bundle": "export or import an air-gapped bundle of a recipe",
    "keys": "the signing key of this home and the keys it trusts: init, show, trust",
    "verify": "verify a release directory or a campaign offline",
    "report": "the release page's tables, recomputed from results.json",
    "status": "where a campaign stands: steps, slices, rows, scores, ETA (read-only)",
    "store": "the local store of models, datasets and release files: fetch, import, list, verify",
    "merge": "merge the shards of a Slurm campaign into its parent view (after every shard is complete)",
}


def command_module(name: str) -> ModuleType:
    """The module of command NAME (``add_arguments(parser)`` and ``run(args) -> int``); "run" for a run of a recipe
    (`--recipe NAME`), "" for the TUI.

    Imported only when it is the command given: what each one's work needs (pydantic models, the engine, the
    verifier) would otherwise load on every start, and `trace-tui verify` is measured against sha256sum.
    """
    # The one place the command line imports lazily; each command module imports its own needs at its top.
    if name == "images":
        from trace_tui.commands import images as module
    elif name == "hw":
        from trace_tui.commands import hw as module
    elif name == "recipes":
        from trace_tui.commands import recipes_cmd as module
    elif name == "preview":
        from trace_tui.commands import preview as module
    elif name == "bundle":
        from trace_tui.commands import bundle as module
    elif name == "keys":
        from trace_tui.commands import keys as module
    elif name == "verify":
        from trace_tui.commands import verify as module
    elif name == "report":
        from trace_tui.commands import report as module
    elif name == "status":
        from trace_tui.commands import status as module
    elif name == "store":
        from trace_tui.commands import store as module
    elif name == "merge":
        from trace_tui.commands import merge as module
    elif name == "run":
        from trace_tui.commands import run_recipe as module
    else:
        from trace_tui.commands import launch as module
    return module


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, sized without importing shutil (argparse builds one per argument added)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:  # what shutil.get_terminal_size reads: $COLUMNS, else the terminal, else 80
            try:
                columns = int(os.environ.get("COLUMNS", "0")) or os.get_terminal_size(sys.__stdout__.fileno()).columns
            except (AttributeError, ValueError, OSError):
                columns = 80
            width = (columns or 80) - 2
        super().__init__(prog, indent_increment, max_help_position, width)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line naming the problem and where help is (the README's promise), exit 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


GLOBAL_OPTIONS = ("home", "log_format", "log_file")


class _GlobalOption(argparse.Action):
    """--home/--log-format/--log-file given before a subcommand, kept aside as well: a subcommand's parser
    copies its own defaults over the namespace after the top level's values were stored."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"_global_{self.dest}", values)


def add_common(p: argparse.ArgumentParser, *, top: bool = True) -> None:
    """--home/--log-format/--log-file; below the top level (``top=False``) they default to nothing, so that
    a value given before the subcommand stands unless the subcommand's own overrides it."""
    keep = {} if top else {"default": argparse.SUPPRESS}
    action = _GlobalOption if top else "store"
    p.add_argument("--home", metavar="DIR", action=action, type=non_empty,
                   help="trace-tui home for this command (default $TRACE_TUI_HOME)", **keep)
    p.add_argument("--log-format", choices=("console", "json"), action=action,
                   help="log lines for people (console) or machines (json)", **({"default": "console"} | keep))
    p.add_argument("--log-file", metavar="FILE", action=action, type=non_empty, help="also write JSON log lines to FILE",
                   **keep)


def apply_global_options(args: argparse.Namespace) -> None:
    """A --home/--log-format/--log-file given before the subcommand, where the subcommand's parsers left none."""
    for dest in GLOBAL_OPTIONS:
        given = getattr(args, f"_global_{dest}", None)
        if given is not None and getattr(args, dest, None) is None:
            setattr(args, dest, given)


# The Slurm options: on a run without `--scheduler slurm` they would do nothing (and --dry-run would run).
SLURM_ONLY = (("--dry-run", "dry_run"), ("--no-wait", "no_wait"), ("--shard-by", "shard_by"),
              ("--partition", "partition"), ("--account", "account"), ("--gpus-per-node", "gpus_per_node"),
              ("--time", "time"), ("--max-parallel", "max_parallel"))
# Commands whose --models/--seeds/--benchmarks narrow their --recipe and do nothing without one.
NARROWS_ONLY_A_RECIPE = ("hw",)


def refuse_idle_flags(args: argparse.Namespace) -> None:
    """A flag that would be silently ignored is a usage error naming it (exit 2)."""
    command = getattr(args, "command", None)
    max_parallel = getattr(args, "max_parallel", None)
    if max_parallel is not None and not 1 <= max_parallel <= MAX_PARALLEL:
        raise UsageError(f"--max-parallel {short(max_parallel)}: give a whole number from 1 to {MAX_PARALLEL}",
                         hint="Slurm's default MaxArraySize is 1001: no array runs more tasks at once")
    given = next((flag for flag, dest in SLURM_ONLY if getattr(args, dest, None) not in (None, False)), None)
    if command is not None and getattr(args, "scheduler", "none") == "slurm":
        given = "--scheduler slurm"
    if given is not None and command is not None:  # the Slurm options are the top level's, for a run
        raise UsageError(f"{given} goes with a run (`trace-tui --recipe NAME --scheduler slurm ...`), "
                         f"not with `{command}`", hint="leave out " + given)
    if given is not None and getattr(args, "scheduler", "none") != "slurm":
        raise UsageError(f"{given} is a Slurm option and this run is not on Slurm",
                         hint="add --scheduler slurm, or leave out " + given)
    if getattr(args, "check", False) and (command is not None or not getattr(args, "recipe", None)):
        raise UsageError("--check checks a run of a recipe on this machine (`trace-tui --recipe NAME --check`)"
                         + (f", not `{command}`" if command is not None else ", and no --recipe is given"),
                         hint="leave out --check" if command is not None else "add --recipe NAME")
    if getattr(args, "check", False) and getattr(args, "scheduler", "none") == "slurm":
        raise UsageError("--check checks a run on this machine; a Slurm submission is checked on its nodes",
                         hint="leave out --check, or write the batch scripts without submitting them: --dry-run")
    if command in NARROWS_ONLY_A_RECIPE and not getattr(args, "recipe", None):
        given = next((f"--{name}" for name in ("models", "seeds", "benchmarks") if getattr(args, name, None)), None)
        if given is not None:
            raise UsageError(f"{command} {given}: narrows a recipe, and no --recipe is given",
                             hint=f"add --recipe NAME, or leave out {given}")


def add_scheduler(parser: argparse.ArgumentParser) -> None:
    """--scheduler slurm and its options: the campaign split into shards, one Slurm array task each."""
    g = parser.add_argument_group("running on a cluster (Slurm)")
    g.add_argument("--scheduler", choices=("none", "slurm"), default="none",
                   help="slurm: split the campaign into shards and submit them as a job array")
    g.add_argument("--shard-by", choices=("model-seed", "model", "seed"), default=None,
                   help="how to split (default: model-seed for full, model for validation, seed for demo)")
    g.add_argument("--partition", metavar="P", help="Slurm partition")
    g.add_argument("--account", metavar="A", help="Slurm account")
    g.add_argument("--gpus-per-node", type=int, metavar="N", help="GPUs per shard's node (--gres=gpu:N)")
    g.add_argument("--time", metavar="T", help="time limit per shard (Slurm format, e.g. 2-00:00:00)")
    g.add_argument("--max-parallel", type=int, metavar="K",
                   help=f"at most K shards at once (array throttle %%K; 1 to {MAX_PARALLEL})")
    g.add_argument("--dry-run", action="store_true", help="write the batch scripts and print the sbatch commands")
    g.add_argument("--no-wait", action="store_true", help="submit and return instead of following the jobs")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="trace-tui",
        description="Reproduce and verify the TRACE release. With no arguments, opens the terminal UI.",
    )
    parser.add_argument("--version", action="version", version=f"trace-tui {__version__}")
    add_common(parser)
    run = parser.add_argument_group("running a recipe")
    run.add_argument("--recipe", metavar="NAME", help="run this recipe (headless with --yes or without a terminal)")
    run.add_argument("--yes", action="store_true", help="confirm every step; run headless")
    run.add_argument("--campaign", metavar="DIR", help="campaign directory (default: HOME/campaigns/RUN_TAG)")
    # NAME, not the choices, in the usage line: five names do not wrap in a narrow terminal
    run.add_argument("--runtime", choices=RUNTIME_NAMES, default=None, metavar="NAME",
                     help=f"where steps run: {', '.join(RUNTIME_NAMES)} (default: docker where it answers, else local)")
    run.add_argument("--offline", action="store_true", help="no network for any step")
    run.add_argument("--check", action="store_true",
                     help="check what the run needs (store, images, network, Docker, GPUs, disk), item by item, and "
                          "start nothing: exit 0 when it can run here, 3 when not (--log-format json: as JSON)")
    run.add_argument("--redo", action="store_true",
                     help="redo finished work whose inputs changed (its outputs are kept under superseded/)")
    run.add_argument("--local-model", action="append", metavar="ID=PATH[@REV]", default=None,
                     help="also evaluate your own checkpoint (recipe full); repeatable")
    add_recipe_selection(parser)
    add_scheduler(parser)
    parser.register("action", "parsers", _LazyCommands)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_line in COMMANDS.items():
        sub.add_lazy_parser(name, help_line)
    return parser


def _command_parser(name: str, p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of command NAME added to its (so far bare) parser, once."""
    if p.get_default("_module") is None:
        add_common(p, top=False)
        mod = command_module(name)
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return p


class _LazyCommands(argparse._SubParsersAction):
    """Subcommands whose arguments (and modules) are loaded only when the command is the one given.

    The one start-up measure left in the command line, and it subclasses argparse's private action: argparse
    has no public way to add a subparser's arguments once its name is known. Measured here: importing every
    command module to declare its arguments takes 0.40-0.44 s, against 0.12 s for the whole of
    `trace-tui verify --release-dir` on the release; the parser itself, built this way, 0.5 ms.
    """

    def add_lazy_parser(self, name: str, help_line: str) -> None:
        """Command NAME in the list (`--help`, the choices), its parser made only when it is the one given:
        each parser made costs argparse's set-up (a dozen translation lookups), ten of them more than
        a check of `verify`."""
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), help_line))
        self._name_parser_map[name] = None

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        name = values[0]
        if self._name_parser_map.get(name, False) is None:
            help_line = COMMANDS[name]
            self._name_parser_map[name] = self._parser_class(prog=f"{self._prog_prefix} {name}",
                                                             description=help_line)
        if name in self._name_parser_map and name in COMMANDS:
            _command_parser(name, self._name_parser_map[name])
        super().__call__(parser, namespace, values, option_string)


def _dispatch(args: argparse.Namespace) -> int:
    module = getattr(args, "_module", None) or command_module("run" if args.recipe else "")
    return int(module.run(args))


def _say_error(line: str) -> None:
    """One error line on stderr, as a terminal shows it: a newline or an escape sequence in a path it names is
    written escaped (it would otherwise break the one line, or drive the terminal), and no credential in a URL."""
    try:
        print(f"trace-tui: {printable(redact_text(line))}", file=sys.stderr)
    except (OSError, ValueError, AttributeError):  # stderr closed or full too: the exit code says it
        pass


def _stdout_broken(exc: OSError | None = None) -> OSError | None:
    """The error standard output gives on a write (full, or an unwritable descriptor), else None. Its unwritten
    bytes then go to /dev/null, so that Python's own flush at exit adds no second report.

    EXC, an error a command met: a full disk that names no file is standard output's when its filesystem has no
    space left (a file), or when it refuses even an empty write (a device such as /dev/full). A failed write
    empties the buffer, so flushing again does not tell."""
    import errno
    import stat

    broken: OSError | None = None
    try:
        sys.stdout.flush()
    except OSError as flushed:
        broken = flushed
    if broken is None and exc is not None and exc.filename is None and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            fd = sys.stdout.fileno()
            if stat.S_ISREG(os.fstat(fd).st_mode):
                vfs = os.fstatvfs(fd)
                broken = exc if min(vfs.f_bavail, vfs.f_bfree) == 0 else None
            else:
                os.write(fd, b"")
        except OSError:
            broken = exc
        except ValueError:  # no descriptor behind it
            pass
    if broken is not None:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass
    return broken


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    apply_global_options(args)
    if sys.stdout is None:  # started with its standard output closed (`>&-`): what it prints would be lost
        _say_error("error: standard output is closed (give it somewhere to write: `> FILE`, or `> /dev/null` "
                   "to discard it)")
        return ExitCode.USAGE
    try:
        refuse_idle_flags(args)
        code = _dispatch(args)
        sys.stdout.flush()  # a full standard output (`> /dev/full`) fails here, inside the one-line handling
        return code
    except TraceTuiError as exc:
        _say_error(f"error: {exc.line()}")
        return exc.exit_code
    except KeyboardInterrupt:
        _say_error("interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # e.g. `trace-tui report | head`
        _stdout_broken()
        return ExitCode.OK
    except OSError as exc:
        # A path that cannot be used (a name too long, a link loop, a folder this user may not read) or a standard
        # output that cannot be written: one line naming it, exit 2, whichever command met it first.
        broken = _stdout_broken(exc)
        if broken is not None:
            _say_error(f"error: cannot write to standard output ({broken.strerror or broken}); "
                       "give it somewhere with space, or `> /dev/null` to discard it")
            return ExitCode.USAGE
        line = os_error_line(exc)
        if line is None:
            return _internal_error(exc)
        _say_error(f"error: {line}")
        from trace_tui.errors import out_of_space

        return ExitCode.FAILED if out_of_space(exc) else ExitCode.USAGE
    except RuntimeError as exc:
        if not str(exc).startswith("Symlink loop from "):  # pathlib's resolve() (Python 3.11) on a link loop
            return _internal_error(exc)
        where = str(exc)[len("Symlink loop from "):].strip("'")
        _say_error(f"error: {where}: a symbolic link loop "
                   "(a link that leads back to itself); give a path without one")
        return ExitCode.USAGE
    except Exception as exc:  # noqa: BLE001 - the one place that turns surprises into one line
        return _internal_error(exc)


def _internal_error(exc: BaseException) -> int:
    if os.environ.get("TRACE_TUI_DEBUG"):
        raise exc
    _say_error(f"internal error: {type(exc).__name__}: {exc} "
               "(set TRACE_TUI_DEBUG=1 for the traceback, and please report it)")
    return ExitCode.FAILED


def entry() -> None:
    """The `trace-tui` executable and `python -m trace_tui`: main(), then exit with its code."""
    import signal

    # SIGINT means stop, whoever sends it (the exit code 130 of the README). A shell without job control
    # starts `trace-tui ... &` with SIGINT ignored, and Python then installs no handler: the Slurm watch
    # and `status --watch` ran on through a `kill -INT`, unlike a run on one node, which sets its own.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = main()
    if teardown_skippable():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed pipe: exit the ordinary way, which reports it
            raise SystemExit(code) from None
        os._exit(code)
    raise SystemExit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
