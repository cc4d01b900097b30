"""ers-deep: batched torch environments and learned ER symmetries (not yet implemented).

This package is a placeholder: the Hanabi / Overcooked V2 environments, IPPO and the learned symmetry
networks arrive with their own issues. It depends on ers-exact (never the reverse).
"""

__all__: list[str] = []
__version__ = "0.0.1"
