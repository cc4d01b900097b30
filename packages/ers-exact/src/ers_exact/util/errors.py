"""The one marker of "bad input" shared by both packages.

An exception class that also derives from :class:`InputError` means the user asked for something invalid
(a value, a file, a game, a budget that refuses the request); the command line reports it as one line with
exit status 2. Every other exception is a bug and is reported as an internal error (exit 1), so a numpy
``ValueError`` deep in a solver can never masquerade as the user's mistake.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(Exception):
    """Base (mixin) of every error caused by the user's input; the message names the value."""
