"""Errors any part of the library may raise that are the user's to fix (the command line prints them
in one line, ``command_line.USER_ERRORS``)."""

from __future__ import annotations


class MissingExtra(ImportError):
    """An optional package a feature needs is not installed; the message says what to install."""
