"""The population protocol of the paper (Table 1: SP, XP, XP(*), XP(*)+MDP, XP(*)+ER per population; Table 2:
the learned symmetries' composition and invertibility metrics), from self-play pools, deep discovery and
other-play, at any scale (``PopulationConfig``)."""

from ers_deep.zsc.config import PopulationConfig
from ers_deep.zsc.population import POPULATIONS, load_deployed, run_table1, run_table2

__all__ = ["POPULATIONS", "PopulationConfig", "load_deployed", "run_table1", "run_table2"]
