"""The bounds of the population runs' seed layout (``ers-deep table1`` / ``table2``), in a module without heavy
imports so that the command line checks them without loading the experiment code (``ers_deep.zsc.config``).

Agent A of a run with seed S trains its self-play seeds S * 10000 + 100 A + [0, k), its OP-MDP seeds + 50 + [0, m),
its OP-ER seeds + 70 + [0, m) and its unseen self-play seeds (Table 2's Pi_unseen, where asked) + 90 + [0, u); its discovery draws from S * 100 + A (+ 50 for sp-max-reg). Within these bounds
no two of them (nor two runs' agents) share a seed: past them an agent's self-play seed was its OP-MDP seed (the
same policy where Phi_MDP is the identity), its OP-MDP seeds its OP-ER ones, or two agents' pools overlapped.
"""

from __future__ import annotations

__all__ = ["MAX_AGENTS", "MAX_K", "MAX_M", "MAX_UNSEEN"]

MAX_AGENTS = 50  # P, agents per population
MAX_K = 50  # self-play seeds per agent
MAX_M = 20  # OP seeds per agent and kind
MAX_UNSEEN = 10  # unseen self-play seeds per agent (PopulationConfig.unseen)
