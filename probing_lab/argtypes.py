"""argparse ``type=`` functions for the command line's count options (``--limit``, ``--max-tokens``,
``-k``, ``--threads``, ...): a value out of range is a usage error naming the option, never a
traceback or a silently different count (a negative ``--limit`` would slice from the end)."""

from __future__ import annotations

import argparse


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {value}")
    return value


def layer_list(text: str) -> list:
    """``0,1,2,mix`` -> ``[0, 1, 2, "mix"]`` (the experiment file checks the names)."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"expected layers separated by commas, e.g. 0,1,2, got {text!r}")
    return [int(item) if item.isdigit() else item for item in items]


def seed_list(text: str) -> list[int]:
    """``0,1,2`` -> ``[0, 1, 2]``: whole numbers >= 0, none repeated (``stats.check_seeds``)."""
    from .stats import check_seeds

    items = [item.strip() for item in text.split(",")]
    if not all(item.lstrip("-").isdigit() for item in items):
        raise argparse.ArgumentTypeError(f"expected seeds separated by commas, e.g. 0,1,2, got {text!r}")
    try:
        return check_seeds([int(item) for item in items])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
