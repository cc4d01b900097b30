"""Networks of the learners (torch): ``layers`` (parameters with a leading seed dimension) and
``actor_critic`` (the Hanabi feed-forward net, the Overcooked V2 CNN + GRU, the tabular head; one config),
``state`` (``NetState``: the per-actor state a net carries between steps, in named fields), ``sampling`` (the one
action sampler), ``switches`` (``ProductSwitches``: the CPU product switches a learner enters around its work)."""

from ers_deep.nets.actor_critic import NETS, ActorCritic, NetConfig, build_net, take_rows
from ers_deep.nets.sampling import masked_logits, policy_mask, sample
from ers_deep.nets.state import NetState

__all__ = [
    "NETS",
    "ActorCritic",
    "NetConfig",
    "NetState",
    "build_net",
    "masked_logits",
    "policy_mask",
    "sample",
    "take_rows",
]
