"""Networks of the learners (torch): ``layers`` (parameters with a leading seed dimension) and
``actor_critic`` (the Hanabi feed-forward net, the Overcooked V2 CNN + GRU, the tabular head; one config), ``sampling`` (the one action sampler)."""

from ers_deep.nets.actor_critic import NETS, ActorCritic, NetConfig, build_net
from ers_deep.nets.sampling import masked_logits, policy_mask, sample

__all__ = ["NETS", "ActorCritic", "NetConfig", "build_net", "masked_logits", "policy_mask", "sample"]
