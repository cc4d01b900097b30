"""Other-play training (ers_deep.other_play on ers_deep.nets.other_play.OtherPlayNet): with Phi = {identity} it
is self-play bit for bit; every actor draws its phi per episode and the PPO update replays the rollout's draws;
OP pools are ordinary pools (crossplay, resume); the symmetriser is invariant under its group; bad sources."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from ers_deep.cli import main
from ers_deep.crossplay import crossplay_matrix
from ers_deep.discovery import DeepDiscoveryConfig, compose, discover
from ers_deep.envs.hanabi import HanabiConfig, HanabiEnv, colour_permutations
from ers_deep.envs.symmetry import Symmetry
from ers_deep.nets import NetConfig, build_net, masked_logits
from ers_deep.nets.other_play import OtherPlayNet
from ers_deep.other_play import op_net, op_symmetries, train_op_pool
from ers_deep.pools import PoolError, load_pool, train_pool
from ers_deep.train.config import TrainConfig, paper_config
from ers_deep.train.evaluate import Agent
from ers_deep.train.ippo import Learner
from ers_exact.util.options import UsageError
from tests.deep.threads import one_thread  # noqa: F401 (autouse: a busy CPU made a torch.cat 1000x slower)
from tests.deep.train.twins import trained_params

TOY = "tabular:toy-coordination"


def _toy(**kw: object) -> TrainConfig:
    return paper_config(TOY, **{"num_envs": 64, "seeds": (0, 3), "total_env_steps": 64 * 2 * 4, **kw})


def _hanabi(preset: str, **kw: object) -> TrainConfig:
    base = {
        "hanabi_preset": preset,
        "num_envs": 16,
        "num_steps": 16,
        "minibatches": 2,
        "seeds": (0, 1),
        "total_env_steps": 16 * 16 * 3,
        "net": NetConfig(hidden=32),
    }
    return paper_config("hanabi", **{**base, **kw})


# ---- Phi = {identity} is self-play ------------------------------------------------------------------------------
# Hanabi: other-play's net carries state (actor id, episodes started), so its minibatches hold whole games; self-play
# draws the same ones with turn_streams=False (the default draws turn streams, ers_deep.train.ppo.turn_streams), and
# multiplies its embedding in float32 as other-play's net does (int8_inputs=False: a given net never takes the int8
# embedding; until 2026-12-07 the OP learner, built last, switched it off for the self-play learner too)
@pytest.mark.parametrize(
    "config",
    [_toy(), _hanabi("Hanabi-Very-Small", turn_streams=False, int8_inputs=False)],
    ids=["toy", "hanabi-very-small"],
)
def test_op_with_the_identity_set_is_self_play(config: TrainConfig) -> None:
    phi = op_symmetries(config, "none")
    assert [s.name for s in phi] == ["identity"]
    assert [s.name for s in op_symmetries(config, "mdp")] == ["identity"]  # neither env has others
    torch.manual_seed(0)
    sp = Learner(config)
    op = Learner(config, net=op_net(config, phi))
    for _ in range(3):
        assert json.dumps(sp.train_step()) == json.dumps(op.train_step())  # every metric, NaN included
    assert isinstance(op.net, OtherPlayNet)
    base = op.net.base.state_dict()
    for k, v in sp.net.state_dict().items():
        assert torch.equal(v, base[k]), k


def test_op_pool_with_the_identity_set_is_the_self_play_pool(tmp_path: Path) -> None:
    cfg = _toy()
    sp = train_pool(cfg, tmp_path / "sp", eval_games=300, progress=False)
    op = train_op_pool(cfg, "none", tmp_path / "op", eval_games=300, progress=False)
    assert op["other_play"]["symmetries"] == ["identity"] and op["other_play"]["source"] == "none"
    for a, b in zip(sp["policies"], op["policies"]):
        assert a["self_play"] == b["self_play"] == b["other_play"]  # same deals, same draws: OP = SP
        assert a["final_return"] == b["final_return"] and a["exact"] == b["exact"]
    for a, b in zip(load_pool(tmp_path / "sp").policies, load_pool(tmp_path / "op").policies):
        for k, v in a.net.state_dict().items():
            assert torch.equal(v, b.net.state_dict()[k])


# ---- the draws ---------------------------------------------------------------------------------------------------
def test_draws_per_actor_and_episode_and_the_update_replays_them() -> None:
    cfg = _hanabi("Hanabi-Small", num_steps=48, num_envs=24, seeds=(0,))
    phi = op_symmetries(cfg, "mdp")
    assert [s.name for s in phi] == ["colours(0, 1)", "colours(1, 0)"]
    learner = Learner(cfg, net=op_net(cfg, phi))
    net = learner.net
    assert isinstance(net, OtherPlayNet)
    rollouts = [learner.collect()[0] for _ in range(3)]
    draws = [net.draws(ro.hidden0, ro.first) for ro in rollouts]  # [1, T, N] each
    d = torch.cat(draws, 1)[0]  # [T, N], N = games x 2 agents (agent fastest)
    first = torch.cat([ro.first for ro in rollouts], 1)[0]
    same = d[1:] == d[:-1]
    assert bool(same[~first[1:]].all())  # constant within an episode, across rollout boundaries too
    redrawn = (~same[first[1:]]).float().mean()
    assert 0.3 < float(redrawn) < 0.7  # a fresh uniform draw at episode starts (G = 2: changes half the time)
    differ = (d[:, 0::2] != d[:, 1::2]).float().mean()
    assert 0.3 < float(differ) < 0.7  # the two agents of a game draw independently
    assert set(d.unique().tolist()) == {0, 1}
    for ro, dr in zip(rollouts, draws):
        # the collected log-probabilities are pi through phi_d, d the draw recomputed from the stored rollout
        per_phi = []
        own = ro.hidden0._replace(actor=None, episode=None)  # pi's own state
        for s in phi:
            logits, _, _ = net.base(s.apply_obs(ro.obs), ro.first, own)
            per_phi.append(logits.index_select(-1, s.action_map))
        logits = torch.stack(per_phi).gather(0, dr[None, ..., None].expand(1, *per_phi[0].shape))[0]
        logp = torch.log_softmax(masked_logits(logits, ro.legal), -1)
        expected = logp.gather(-1, ro.action[..., None])[..., 0]
        assert torch.allclose(expected, ro.logp, atol=1e-5)
        # ... and a minibatch of shuffled actors (the PPO update's view) replays the same draws
        idx = torch.randperm(ro.obs.shape[2], generator=torch.Generator().manual_seed(1))[:10]
        out, _, _ = net(ro.obs[:, :, idx], ro.first[:, :, idx], ro.hidden0.select(idx))
        lp = torch.log_softmax(masked_logits(out, ro.legal[:, :, idx]), -1)
        assert torch.allclose(
            lp.gather(-1, ro.action[:, :, idx, None])[..., 0], ro.logp[:, :, idx], atol=1e-5
        )
    assert bool((d == 1).any())  # the non-identity phi is really played: the logits differ there
    ro = rollouts[0]
    plain, _, _ = net.base(ro.obs, ro.first, ro.hidden0._replace(actor=None, episode=None))
    op_logits, _, _ = net(ro.obs, ro.first, ro.hidden0)
    assert not torch.allclose(plain[draws[0] == 1], op_logits[draws[0] == 1])
    # the batched gather of index symmetries equals the per-phi path any other symmetry takes
    wrapped = OtherPlayNet(net.base, [compose([s]) for s in phi])
    assert net.obs_indices is not None and wrapped.obs_indices is None
    assert torch.equal(wrapped(ro.obs, ro.first, ro.hidden0)[0], op_logits)


def _op_params(cfg: TrainConfig, phi: tuple[Symmetry, ...], mode: str, updates: int) -> list[torch.Tensor]:
    return trained_params(cfg.replace(update_mode=mode), updates, net=op_net(cfg, phi))


def test_the_compiled_op_update_equals_the_eager_one() -> None:
    """Other-play on a feed-forward pi compiles its update as self-play does (its state, actor ids and episodes
    started, follows resets through cumulative sums): parameters after 3 updates within 1e-6 of the eager
    update's, with the draws replayed in the compiled loss."""
    cfg = _hanabi("Hanabi-Small", num_steps=24)
    phi = op_symmetries(cfg, "mdp")
    assert len(phi) > 1
    eager = _op_params(cfg, phi, "eager", 3)
    compiled = _op_params(cfg, phi, "compile", 3)
    assert max(float((a - b).abs().max()) for a, b in zip(eager, compiled, strict=True)) < 1e-6
    moved = _op_params(cfg, phi, "eager", 0)
    assert max(float((a - b).abs().max()) for a, b in zip(eager, moved, strict=True)) > 1e-4


def test_auto_compiles_the_op_update_where_self_play_s_compiles() -> None:
    """``update_mode="auto"`` at 8,192 samples per minibatch: other-play with index symmetries compiles (before
    2026-12-07 any state between steps kept it eager); so do symmetries that are not index maps (their phi_O
    selects entries, a host sync, but the update reads phi_O(o) stored once per rollout: ``on_stored_inputs``)."""
    cfg = _hanabi("Hanabi-Small", num_envs=512, num_steps=16, minibatches=2)  # 16 x 1,024 / 2 samples
    phi = op_symmetries(cfg, "mdp")
    assert Learner(cfg).updater.mode == "compile"
    assert Learner(cfg, net=op_net(cfg, phi)).updater.mode == "compile"
    other = OtherPlayNet(op_net(cfg, phi).base, [compose([s]) for s in phi])
    assert not other.traceable and other.on_stored_inputs().traceable
    assert Learner(cfg, net=other).updater.mode == "compile"


def test_each_seed_draws_its_own_phi_and_stacking_keeps_them() -> None:
    """Stacked seeds (and a ZSC population's agents, trained as seeds of one pool) draw independent phi
    sequences: before 2026-12-07 the draw hashed (actor, episode) alone, so every seed drew the same. Seed s's
    draws in a stack equal its draws alone (as Ray's one seed per task trains it)."""
    full = colour_permutations(HanabiConfig.preset("Hanabi-Full", players=2))
    N, T = 200, 6
    first = torch.ones(1, T, N, dtype=torch.bool)

    def draws(seeds: tuple[int, ...]) -> torch.Tensor:
        base = build_net(NetConfig(hidden=8), seeds, full[0].obs_shape, len(full[0].action_map))
        net = OtherPlayNet(base, full)
        return net.draws(net.initial_state(N), first.expand(len(seeds), T, N))

    stacked = draws((3, 7))
    assert float((stacked[0] == stacked[1]).float().mean()) < 0.05  # 1/120 by chance
    assert torch.equal(stacked[1], draws((7,))[0]) and torch.equal(stacked[0], draws((3,))[0])


def test_draws_cover_the_120_colour_permutations_uniformly() -> None:
    full = colour_permutations(HanabiConfig.preset("Hanabi-Full", players=2))
    base = build_net(NetConfig(hidden=8), [0], full[0].obs_shape, len(full[0].action_map))
    net = OtherPlayNet(base, full)
    N, T = 600, 20
    first = torch.ones(1, T, N, dtype=torch.bool)  # every step starts an episode: T x N draws
    counts = torch.bincount(net.draws(net.initial_state(N), first).flatten(), minlength=120)
    assert counts.numel() == 120 and int(counts.min()) > 50 and int(counts.max()) < 155  # mean 100


# ---- OP pools end to end -----------------------------------------------------------------------------------------
def test_train_op_cli_on_hanabi_small_writes_a_pool_crossplay_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "op"
    argv = [
        "train-op",
        "--env",
        "hanabi",
        "--preset",
        "Hanabi-Small",
        "--symmetries",
        "mdp",
        "--seeds",
        "0-1",
    ]
    argv += ["--num-envs", "8", "--num-steps", "8", "--total-steps", "128", "--hidden", "16"]
    argv += ["--minibatches", "2", "--eval-games", "20", "--threads", "1", "--out", str(out), "--json"]
    assert main(argv) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == json.loads((out / "pool.json").read_text())
    assert info["other_play"] == {
        "source": "mdp",
        "path": None,
        "discovery_sha256": None,
        "symmetries": ["colours(0, 1)", "colours(1, 0)"],
    }
    assert all({"self_play", "other_play", "final_return"} <= set(p) for p in info["policies"])
    pool = load_pool(out)
    assert [p.seed for p in pool.policies] == [0, 1]
    assert not isinstance(pool.policies[0].net, OtherPlayNet)  # the frozen policy is pi itself
    m = crossplay_matrix(
        pool.policies, pool.policies, 10, symmetries=op_symmetries(pool.policies[0].config, "mdp")
    )
    assert len(m["mean"]) == 2 and m["symmetries"] == 2
    assert main(["crossplay", str(out), "--games", "5", "--json"]) == 0
    assert "report" in json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def toy_discovery(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("op-discovery")
    train_pool(_toy(seeds=(0, 1)), root / "pool", eval_games=100, progress=False)
    cfg = DeepDiscoveryConfig(
        candidates=2, top=1, num_envs=16, num_steps=2, total_env_steps=64, eval_games=50
    )
    discover(load_pool(root / "pool"), cfg, root / "discovery", progress=False)
    return root / "discovery"


def test_learned_symmetries_and_an_exact_resume(toy_discovery: Path, tmp_path: Path) -> None:
    cfg = _toy(total_env_steps=64 * 2 * 6, checkpoint_every=2)
    phi = op_symmetries(cfg, str(toy_discovery / "discovery.json"))
    assert [s.name for s in phi] == ["identity", "phi-0"]
    whole = train_op_pool(cfg, str(toy_discovery), tmp_path / "whole", eval_games=200, progress=False)
    rec = whole["other_play"]
    assert rec["symmetries"] == ["identity", "phi-0"] and rec["path"] == str(toy_discovery.absolute())
    assert len(rec["discovery_sha256"]) == 64
    part = tmp_path / "part"
    train_op_pool(cfg, str(toy_discovery), part, eval_games=200, progress=False, max_updates=3)
    with pytest.raises(PoolError, match="trained with symmetries"):
        train_op_pool(None, "mdp", part, resume_run=True)
    resumed = train_op_pool(None, None, part, resume_run=True, eval_games=200, progress=False)
    assert resumed["other_play"] == rec
    for a, b in zip(whole["policies"], resumed["policies"]):
        assert a["self_play"] == b["self_play"] and a["other_play"] == b["other_play"]
    for a, b in zip(load_pool(tmp_path / "whole").policies, load_pool(part).policies):
        for k, v in a.net.state_dict().items():
            assert torch.equal(v, b.net.state_dict()[k]), k
    with pytest.raises(UsageError, match="exact"):
        train_op_pool(cfg.replace(advantage="exact"), str(toy_discovery), tmp_path / "exact")


# ---- the symmetriser ---------------------------------------------------------------------------------------------
def _hanabi_observations(preset: str, games: int = 8, steps: int = 5) -> torch.Tensor:
    env = HanabiEnv(preset, batch_size=games, seed=3)
    env.reset(seed=3)
    gen = torch.Generator().manual_seed(3)
    seen = []
    for _ in range(steps):
        seen.append(env.observe().reshape(-1, *env.obs_shape))
        legal = env.legal_mask()
        legal = legal | ~legal.any(-1, keepdim=True)
        actions = torch.multinomial(legal.reshape(-1, legal.shape[-1]).float(), 1, generator=gen)
        env.step(actions.view(games, -1))
    return torch.cat(seen)


@pytest.mark.parametrize(("preset", "order"), [("Hanabi-Small", 2), ("Hanabi-Full", 120)])
def test_the_symmetriser_is_invariant_under_its_group(preset: str, order: int) -> None:
    group = colour_permutations(HanabiConfig.preset(preset, players=2))
    assert len(group) == order
    obs = _hanabi_observations(preset)
    n = obs.shape[0]
    net = build_net(NetConfig(hidden=16), [5], tuple(obs.shape[1:]), len(group[0].action_map))
    agent = Agent(net, tuple(group))
    first = torch.ones(n, dtype=torch.bool)
    cpu = torch.device("cpu")
    at_o, _ = agent.logits(obs, first, agent.initial_state(n, cpu))
    for phi in group:
        at_phi_o, _ = agent.logits(phi.apply_obs(obs), first, agent.initial_state(n, cpu))
        # S(pi)(phi_A(a) | phi_O(o)) = S(pi)(a | o): the symmetrised policy is phi(S(pi)) for every phi in G
        assert torch.allclose(at_phi_o.index_select(-1, phi.action_map), at_o, atol=1e-5), phi.name
    # pi itself is not invariant (so the check above has teeth)
    plain, swap = Agent(net), group[-1]
    at_o, _ = plain.logits(obs, first, plain.initial_state(n, cpu))
    at_phi_o, _ = plain.logits(swap.apply_obs(obs), first, plain.initial_state(n, cpu))
    assert not torch.allclose(at_phi_o.index_select(-1, swap.action_map), at_o, atol=1e-3)


# ---- bad sources -------------------------------------------------------------------------------------------------
def test_bad_sources_name_the_value(toy_discovery: Path, tmp_path: Path) -> None:
    with pytest.raises(PoolError, match="'er'"):
        op_symmetries(_toy(), "er")
    with pytest.raises(PoolError, match=r"no discovery\.json"):
        op_symmetries(_toy(), str(tmp_path))
    with pytest.raises(PoolError, match="learned on tabular:toy-coordination"):
        op_symmetries(_hanabi("Hanabi-Small"), str(toy_discovery))
    with pytest.raises(PoolError, match="no other-play run"):
        train_op_pool(None, None, tmp_path / "nothing", resume_run=True)
    with pytest.raises(UsageError, match="give a config"):
        train_op_pool(None, "none", tmp_path / "nothing")


@pytest.mark.slow  # a local Ray instance (~13 s); tests/deep/test_ray.py::test_cli_ray_errors stays in the default run
def test_op_pool_on_ray_equals_one_seed_op_pools(toy_discovery: Path, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    from ers_deep.other_play import train_op_pool_ray

    cfg = _toy(seeds=(0, 4), total_env_steps=64 * 2 * 3)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        info = train_op_pool_ray(cfg, str(toy_discovery), tmp_path / "rp", "local", eval_games=100, threads=1)
    finally:
        ray.shutdown()
    assert info["other_play"]["symmetries"] == ["identity", "phi-0"]
    assert json.loads((tmp_path / "rp" / "pool.json").read_text()) == info
    one = train_op_pool(cfg.replace(seeds=(4,)), str(toy_discovery), tmp_path / "one", eval_games=100)
    assert info["policies"][1]["other_play"] == one["policies"][0]["other_play"]
    a, b = load_pool(tmp_path / "rp").policies[1], load_pool(tmp_path / "one").policies[0]
    for k, v in a.net.state_dict().items():
        assert torch.equal(v, b.net.state_dict()[k]), k


def test_game_labels_name_the_layout_and_legacy_labels_are_unchecked(
    toy_discovery: Path, tmp_path: Path
) -> None:
    """Overcooked results name their layout (they named the Hanabi preset), so other-play checks their game like
    every other env's; a discovery output with the old label is checked by its shapes alone."""
    from ers_deep.discovery.files import learned_game

    over = paper_config("overcooked-v2", layout="cramped_room_v2")
    assert (
        over.game == "overcooked-v2:cramped_room_v2" and _hanabi("Hanabi-Small").game == "hanabi:Hanabi-Small"
    )
    with pytest.raises(
        PoolError, match="learned on tabular:toy-coordination, not on overcooked-v2:cramped_room_v2"
    ):
        op_symmetries(over, str(toy_discovery))
    legacy = tmp_path / "legacy"
    shutil.copytree(toy_discovery, legacy)
    data = json.loads((legacy / "discovery.json").read_text())
    assert learned_game(legacy) == data["game"] == "tabular:toy-coordination"
    legacy_config = {k: v for k, v in data["config"].items() if k != "env_key"}  # recorded since 12-04
    (legacy / "discovery.json").write_text(
        json.dumps({**data, "game": "overcooked-v2:Hanabi-Full", "config": legacy_config})
    )
    assert learned_game(legacy) is None
    with pytest.raises(PoolError, match="maps observations"):  # still refused: its shapes are the toy game's
        op_symmetries(over, str(legacy))


def test_symmetries_of_another_observation_encoding_are_refused(toy_discovery: Path, tmp_path: Path) -> None:
    """discovery.json records the observations phi maps (``TrainConfig.env_key``: Hanabi's plausible bits and
    V0 belief are one shape and one game); a record that is not the env's is refused."""
    data = json.loads((toy_discovery / "discovery.json").read_text())
    assert data["config"]["env_key"] == ["tabular:toy-coordination"]
    other = tmp_path / "other"
    shutil.copytree(toy_discovery, other)
    data["config"]["env_key"] = ["tabular:toy-coordination", "another-encoding"]
    (other / "discovery.json").write_text(json.dumps(data))
    with pytest.raises(PoolError, match="map the observations of tabular:toy-coordination another-encoding"):
        op_symmetries(_toy(), str(other))
    assert [s.name for s in op_symmetries(_toy(), str(toy_discovery))] == ["identity", "phi-0"]


def test_a_refused_config_leaves_no_other_play_record(tmp_path: Path) -> None:
    """A config the learner refuses (more minibatches than actors) left run/other_play.json behind; a self-play
    pool trained into that folder then resumed with neither train-sp ("an other-play pool") nor train-op (its
    checkpoint does not fit an other-play net)."""
    with pytest.raises(UsageError, match="minibatches"):
        train_op_pool(_toy(minibatches=10_000), "mdp", tmp_path)
    assert not (tmp_path / "run" / "other_play.json").exists()
    train_pool(_toy(), tmp_path, eval_games=10, max_updates=2)
    assert main(["train-sp", "--resume", str(tmp_path), "--eval-games", "10"]) == 0
    assert load_pool(tmp_path).info["training"]["finished"]
