"""The util layer, below every other: helpers that know nothing of games or policies (a terminal
progress bar, and the option and command-line plumbing shared with ers-deep). Nothing here imports
another ers_exact layer.
"""

from ers_exact.util.progress import Progress

__all__ = ["Progress"]
