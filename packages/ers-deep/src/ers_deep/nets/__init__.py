"""Networks of the learners (torch): ``layers`` (parameters with a leading seed dimension) and
``actor_critic`` (the Hanabi feed-forward net, the Overcooked V2 CNN + GRU, the tabular head; one config)."""

from ers_deep.nets.actor_critic import NETS, ActorCritic, NetConfig, build_net, masked_logits

__all__ = ["NETS", "ActorCritic", "NetConfig", "build_net", "masked_logits"]
