"""The deployment rule of the zero-shot-coordination protocol, shared by ers-exact and ers-deep (plain Python:
the configs that name it load without numpy or torch).

Each agent i trains m other-play seeds {pi_{i,k}}_{k=1}^m and deploys one of them for cross-play. The paper
(Section "Experiments", the population protocol) deploys the best self-play return:

    "Agent i then selects pi_i := argmax_{k=1,...,m} J(pi_{i,k}), and deploys pi_i for cross-play."

and its Hanabi section repeats it ("each agent trains m = 5 policies and deploys the one with the highest
return"). ``select_by`` names the rule, a field of both packages' population configs
(:class:`~ers_exact.zsc.config.PopulationConfig`, ``ers_deep.zsc.PopulationConfig``) recorded in each ``ZSCReport``'s
config, so a comparison run can hold it equal:

* ``"sp_return"`` (the paper, the default): the highest self-play return J(pi_{i,k});
* ``"op_value"``: the highest OP score (ers-exact's pipeline before the field existed).

Either rule breaks ties (within :data:`TIE`) by the other score, then by the first seed. The rule chooses
among an agent's OP seeds; a self-play population has no OP score and deploys its best self-play policy.

The OP score an ``"op_value"`` rule ranks by differs between the packages when n > 2 (and, for ers-deep, when
Phi is not a group); each report's config names its reading as ``op_reading``, one of :data:`OP_READINGS`.

A report's OP *column* (the OP objective of the deployed policies) is a separate number, and its config names
its reading ``op_column_reading``: ``"seatings"`` in both packages (ers-exact's mean OP^Phi; ers-deep's table1
mean over phi of J(pi, phi(pi)) in both seat orders, two players only: the 2^2 - 2 seatings). So ers-deep's
column is not the ``"per-seat"`` score its agents train on and ``op_value`` ranks by, and for a learned set
that is not a group the two differ even at n = 2. A report written before the field that has an OP column
loads with :data:`OP_COLUMN_READING_BEFORE`, the reading every earlier version of both packages computed.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_SELECT_BY", "OP_COLUMN_READING_BEFORE", "OP_READINGS", "SELECT_BY", "TIE", "deploy_index"]

#: the deployment rules: the paper's highest self-play return, or the highest OP score
SELECT_BY = ("sp_return", "op_value")
#: the paper's rule (Section "Experiments": pi_i := argmax_k J(pi_{i,k}))
DEFAULT_SELECT_BY = "sp_return"
#: scores within this are ties
TIE = 1e-6
#: the readings of the OP score with n agents, by the name a report's ``op_reading`` gives
OP_READINGS = {
    # ers-exact (model.objectives.other_play): eq. other-play with eq. XP's n-agent reading
    "seatings": "OP^Phi(pi) = mean over phi in Phi of XP(pi, phi(pi)), XP the mean of J over the 2^n - 2 "
    "seatings of the two policies pi and phi(pi) that use both",
    # ers-deep (pool.json's other_play, the learner's objective; the official code's draw)
    "per-seat": "E over phi_1, ..., phi_n drawn uniformly from Phi, each seat its own, of "
    "J(phi_1(pi)^1, ..., phi_n(pi)^n); equal to 'seatings' for n = 2 when Phi is a group",
}
#: ``op_column_reading`` of a report written before the field: the OP column of ers-exact (OP^Phi since the
#: column was added) and of ers-deep's table1 (both seat orders of J(pi, phi(pi)), two players) was "seatings"
OP_COLUMN_READING_BEFORE = "seatings"


def deploy_index(
    sp_return: Sequence[float], op_value: Sequence[float] | None, select_by: str, tie: float = TIE
) -> int:
    """Index of the seed an agent deploys among its m seeds: the best score of rule ``select_by`` (module
    docstring), ties (within ``tie``) by the other score, then the first seed. ``op_value`` may be None
    under ``"sp_return"`` (a self-play pool: ties go to the first seed). ``ValueError`` for an unknown rule,
    no seeds, or lengths that differ."""
    if select_by not in SELECT_BY:
        raise ValueError(f"select_by {select_by!r}: choose one of {', '.join(SELECT_BY)}")
    if op_value is None and select_by == "op_value":
        raise ValueError("select_by 'op_value' needs the seeds' OP scores")
    sp = [float(v) for v in sp_return]
    op = [0.0] * len(sp) if op_value is None else [float(v) for v in op_value]
    if not sp or len(op) != len(sp):
        raise ValueError(f"deploy_index: {len(sp)} self-play and {len(op)} OP scores, one of each per seed")
    first, second = (sp, op) if select_by == "sp_return" else (op, sp)
    best = [i for i, v in enumerate(first) if v >= max(first) - tie]
    top = max(second[i] for i in best)
    return next(i for i in best if second[i] >= top - tie)
