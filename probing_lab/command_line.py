"""What every ``probing-lab`` command shares, written once: the model and seed options, the output
folder and its ``--force`` (the rule of :mod:`probing_lab.fileio`), keyword arguments read from the
parsed options, and the errors a command reports in one line instead of a traceback.

A command's parser calls :func:`add_model_options` / :func:`add_output_folder`; the command calls
:func:`output_folder` before any work and passes the folder it returns to its writer;
``probing_lab.cli.main`` runs every command through :func:`run_command`.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import logging
import sys
from pathlib import Path
from typing import Callable

from .errors import MissingExtra

log = logging.getLogger("probing_lab")


# what a user can cause (a bad path, value or file): one line on stderr and exit status 2
USER_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, ValueError, KeyError, MissingExtra)

MODEL_HELP = (
    "a model folder (data/models/elmo-lab; or the options.json + weights.hdf5 of a released ELMo, as "
    "`probing-lab download NAME` writes them), a training checkpoint, or random:PRESET (default: the shipped model)"
)


def add_model_options(p: argparse.ArgumentParser, help: str = MODEL_HELP, seed: bool = True) -> None:
    """``--model`` and (``seed``) ``--seed``, the seed of a ``random:PRESET`` model."""
    p.add_argument("--model", help=help)
    if seed:
        p.add_argument("--seed", type=int, default=0, help="seed of a random:PRESET model (default 0)")


def add_output_folder(p: argparse.ArgumentParser, help: str, required: bool = True, resumable: bool = False) -> None:
    """``--out FOLDER`` and ``--force``, with the one rule every command follows (fileio). A
    ``resumable`` command continues an earlier run in --out instead of replacing it."""
    p.add_argument("--out", required=required, help=help)
    replace = "" if resumable else "replace an earlier run of this command in --out; "
    p.add_argument(
        "--force",
        action="store_true",
        help=f"{replace}a folder holding other files gets the run in a new subfolder (nothing the lab did not "
        "write is removed)",
    )


def output_folder(
    args: argparse.Namespace,
    command: str,
    *inputs,
    names: tuple[str, ...] = (),
    fresh: str = "",
    out: str | Path | None = None,
    resumable: bool = False,
) -> Path:
    """The folder to write the run into, checked before any work (``fileio.check_output_dir``):
    ``args.out`` (or ``out``) itself, or with ``--force`` a new subfolder of a folder that holds the
    user's own files (said in a log line)."""
    given = Path(out if out is not None else args.out)
    from .fileio import check_output_dir

    force = getattr(args, "force", False)
    folder = check_output_dir(
        given, *inputs, command=command, force=force, names=names, fresh=fresh, resumable=resumable
    )
    if folder != given:
        log.info("--out %s holds files that are not a run of this command: writing the run into %s", given, folder)
    return folder


def from_args(target: Callable, args: argparse.Namespace, **given):
    """Call ``target`` (a function or a dataclass) with ``given`` and, for each other parameter it
    takes, the parsed option of the same name (when the command has one)."""
    if dataclasses.is_dataclass(target):
        names = [f.name for f in dataclasses.fields(target) if f.init]
    else:
        names = list(inspect.signature(target).parameters)
    options = vars(args)
    kwargs = {n: options[n] for n in names if n in options and n not in given}
    return target(**kwargs, **given)


def run_command(args: argparse.Namespace) -> int:
    """Run ``args.func``; a user error is one line on stderr (exit 2, or the traceback with
    ``--verbose``), an interrupt exit 130."""
    from .download import DownloadError

    try:
        return args.func(args)
    except (*USER_ERRORS, DownloadError) as e:
        if args.verbose:
            raise
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"probing-lab {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"probing-lab {args.command}: interrupted; nothing was written", file=sys.stderr)
        return 130
