"""ers-exact: exact tabular analysis of expected-return symmetries in Dec-POMDPs (numpy, scipy; never torch).

A game (``Game``: b_0, T, U, R, horizon H) is enumerated once into its history tree, on which every value is
exact and batched over policies (a joint policy is one [K_i, |A^i|] array per agent)::

    from ers_exact.games import get_game
    from ers_exact.model.histories import enumerate_histories
    from ers_exact.model.values import expected_return, uniform_policy

    tree = enumerate_histories(get_game("dectiger", horizon=3))
    expected_return(tree, uniform_policy(tree))  # J(pi)

Layers, lowest first (imports point down only; ``tests/test_architecture.py`` checks it):

* ``util``: the options/CLI contract, checks, strict-JSON output, memory budgets, progress bars, the reader of
  files from strangers (``util.files``: confined to a folder, regular, size-capped, hashed as read);
* ``model``: ``Game``, ``enumerate_histories`` (``HistoryTree``), values (J, Q^i, dJ/dpi), objectives (XP,
  OP^Phi, the symmetriser), transformations phi, the exact self-play optimum J* (``optimal_value``);
* ``io``: the MADP ``.dpomdp`` format and a Gambit ``.efg`` export;
* ``games``: the built-in games (``get_game``, ``GAMES``) and random games;
* ``interface`` (with ``zsc_report``, ``symmetry_match`` and ``deployment``): the torch-free results ers-deep writes too
  (``DiscoveryResult``, ``ZSCReport``) and the deployment rule ``select_by``;
* ``solve``: Boltzmann fixed points pi = softmax(Q^i / alpha) (``solve_fixed_points``), certificates, alpha
  sweeps, Pi*_alpha proven complete (``optimal_set``);
* ``symmetry``: Phi_MDP (``decpomdp_symmetries``) and Phi_ER (``er_symmetries``), as lists or groups;
* ``zsc``: pools Pi', ER discovery (``discover``: Algorithms 1-3), other-play, the population pipeline
  (``run_zsc``: a ``ZSCReport``);
* ``analysis``: symmetry reports (``symmetry_report``), atlases, census, plots;
* ``cli``: the ``ers-exact`` command.

Walkthrough: ``packages/ers-exact/README.md`` and the root README ("Python", "Architecture").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ers_exact.util.lazy import lazy_exports

if TYPE_CHECKING:  # the names, for mypy and IDEs; at run time each is imported on first use
    from ers_exact.model.game import Game, GameError, make_game

__all__ = ["Game", "GameError", "make_game"]
__version__ = "0.1.0"

if not TYPE_CHECKING:  # hidden from mypy, so that a name missing above is an error, not Any
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "Game": "model.game",
            "GameError": "model.game",
            "make_game": "model.game",
        },
    )
