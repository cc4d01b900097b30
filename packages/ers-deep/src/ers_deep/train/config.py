"""The learner's configuration: one frozen dataclass, defaults per env taken from the paper's appendix
("Experimental Setup") and the official code's configs (``../shared/notes/reference-code-and-jaxmarl.md``).

``TrainConfig`` holds every knob of one IPPO self-play run (or pool of seeds); derived values (batch sizes,
number of updates) are properties, never written back; an ``env`` that names no env is refused when the config
is made (built, replaced or read back: ``env_problem``, a .dpomdp path by its form). ``paper_config(env,
**overrides)`` starts from the paper's values for ``env``:

=================  ============================================================================================
env                defaults
=================  ============================================================================================
hanabi             1024 envs x 128 steps, 4 epochs, 4 minibatches, gamma 0.99, GAE 0.95, clip 0.2, value 0.5,
                   max grad norm 0.5, Adam 5e-4 (eps 1e-5) linearly annealed, entropy (alpha) 0.01, the
                   official feed-forward net (512)
overcooked-v2      256 envs x 256 steps, 4 epochs, 64 minibatches, max grad norm 0.25, Adam 2.5e-4 with 5%
                   linear warm-up then cosine, shaped reward annealed 1 -> 0 over 1.5e7 steps, CNN + GRU (128)
tabular:NAME       any ers-exact game (a registered name or a .dpomdp path): tabular head, gamma = the game's,
                   GAE lambda 1 (unbiased Monte-Carlo advantages), no advantage normalisation, so the entropy
                   coefficient is exactly the Boltzmann temperature alpha (see ``ers_deep.train.ippo``)
=================  ============================================================================================
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from dataclasses import dataclass
from typing import Any, Literal

from ers_deep.envs.base import BatchedEnv
from ers_deep.envs.hanabi.config import canonical_preset
from ers_deep.nets import NetConfig
from ers_deep.nets.blas import Bf16Gradients, CpuProducts
from ers_deep.nets.int8 import Int8Inputs
from ers_exact.util.options import (
    MAX_SEED,
    UsageError,
    at_least,
    between,
    check_fields,
    check_types,
    non_negative,
    positive,
)

LrSchedule = Literal["constant", "linear", "warmup-cosine"]
AdvantageMode = Literal["gae", "exact"]
CollectorKind = Literal["fast", "native", "torchrl"]
FastMode = Literal["auto", "eager", "compile", "graph", "compile-graph"]
UpdateMode = Literal["auto", "eager", "compile", "graph", "compile-graph"]
LossMean = Literal["all", "acting"]
HanabiKnowledge = Literal["plausible", "v0-belief"]
ParallelCompile = Literal["auto", "on", "off"]


def checked_seeds(seeds: Any) -> tuple[int, ...]:
    """``seeds`` as a tuple of ints, each an integer (not a bool, float or string) in 0 .. ``MAX_SEED``."""
    if isinstance(seeds, str | bytes) or not hasattr(seeds, "__iter__"):
        raise UsageError(f"TrainConfig.seeds = {seeds!r}: give a sequence of integer seeds, e.g. (0, 1, 2)")
    out = []
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or not 0 <= int(s) <= MAX_SEED:
            raise UsageError(
                f"TrainConfig.seeds = {tuple(seeds)!r}: {s!r} is not an integer in 0 .. {MAX_SEED}"
            )
        out.append(int(s))
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One IPPO self-play run with parameter sharing (S = ``len(seeds)`` seeds trained together)."""

    # env
    # "hanabi", "overcooked-v2", "tabular:NAME" (NAME registered) or a .dpomdp path (its form: env_problem)
    env: str = "hanabi"
    hanabi_preset: str = "Hanabi-Full"  # HLE preset (hanabi)
    # Hanabi's plausible-card features: HLE's bits ("plausible") or JaxMARL's V0 belief ("v0-belief", the JAX
    # anchor's env; ``ers_deep.envs.hanabi.HanabiEnv(knowledge=)``)
    hanabi_knowledge: HanabiKnowledge = "plausible"
    layout: str = "grounded_coord_simple"  # Overcooked V2 layout
    paper_obs: bool = True  # Overcooked V2: the paper's 38 observation channels
    # collection
    num_envs: int = 1024  # games per seed
    num_steps: int = 128  # steps per game per update
    total_env_steps: int = 10**10  # per seed; trained in whole updates, at least one (num_updates)
    collector: CollectorKind = "fast"  # "torchrl" / "native": the reference collections (same rollouts)
    collect_mode: FastMode = (
        "auto"  # the fast collection's mode (ers_deep.accel): auto picks per device/batch
    )
    update_mode: UpdateMode = "auto"  # the PPO minibatch step: eager, compiled, captured (train.update)
    tf32: bool = True  # CUDA: float32 matmuls and convolutions in TF32 (as JAX's default GPU precision)
    # CUDA: cuDNN times its algorithms for each new convolution shape and keeps the fastest
    # (torch.backends.cudnn.benchmark; off: its heuristic pick). Not yet measured on a GPU, so off by default.
    cudnn_benchmark: bool = False
    bf16_update: bool = False  # the PPO loss's forward under bfloat16 autocast (float32 weights and Adam)
    # CPU: the update's gradient products (dx = g W^T, dW = x^T g of the large SLinear products) on bfloat16
    # operands, the forward (loss, ratios, clipping) in float32 (ers_deep.nets.blas.bf16_gradients_bmm). "auto":
    # on where the CPU multiplies bfloat16 natively for the nets whose curve was studied with it (Hanabi's MLP;
    # blas.resolve_bf16_gradients), off on CUDA, beside bf16_update and for the Overcooked V2 CNN + GRU; the run's
    # config.json records what it resolved to, and a resume keeps that
    bf16_gradients: Bf16Gradients = "auto"
    # CPU: the MLP's embedding of 0/1 observations (Hanabi's HLE bits) as two exact int8 products of W's limbs,
    # within ~1e-4 of float32's (ers_deep.nets.int8). "auto": where the CPU has int8 dot products (VNNI) for the
    # nets whose curve was studied with it (Hanabi's MLP; int8.resolve_int8_inputs) in a process that keeps freed
    # memory (keep_cpu_memory), off on CUDA, beside bf16_update and on other observations; config.json records
    # what it resolved to, and a resume keeps that
    int8_inputs: Int8Inputs = "auto"
    # CUDA, compiled modes: inductor tries each Triton pointwise kernel in a few tile configs at its first run
    # (torch's default). False: one heuristic config per kernel, so fewer kernels to compile in the setup
    # (Hanabi's: ~75 s on an H200). Not yet measured on a GPU; nothing changes on CPU (C++ kernels).
    autotune_pointwise: bool = True
    # CUDA, compiled modes: inductor times cuBLAS against its Triton GEMM templates for every product of the step
    # and the update and keeps the fastest (max_autotune_gemm; a Triton GEMM takes the bias and ReLU after it into
    # its epilogue, one pass over memory fewer). Compilation takes longer (each product shape is timed). Not yet
    # measured on a GPU (a throughput row variant); nothing changes on CPU.
    gemm_autotune: bool = False
    # where the collection step and the update both compile: the update compiled in a helper process meanwhile,
    # into inductor's caches, from which this learner's first update loads it (train.precompile). "auto": on CUDA
    parallel_compile: ParallelCompile = "auto"
    # CPU: glibc keeps the memory the learner frees for its next tensors instead of unmapping each large one
    # (train.memory.keep_freed_memory; process-wide, resident memory stays near its peak). Off: glibc's defaults
    keep_cpu_memory: bool = True
    # CPU: the nets' dense products (SLinear) by torch's BLAS (MKL on x86) or by numpy's OpenBLAS
    # (ers_deep.nets.blas; in the learner's collection and update). "auto": OpenBLAS on AMD x86 CPUs, where MKL
    # runs its AVX2 kernels only
    cpu_products: CpuProducts = "auto"
    acting_rows: bool = True  # Hanabi: the actor head on acting entries only (a static count per minibatch)
    # with acting rows, minibatches of turn streams (train.ppo.turn_streams: a game's seats split as the JAX
    # anchor's minibatches of actors split them); False, or a net that carries state: of whole games
    turn_streams: bool = True
    # PPO
    epochs: int = 4
    minibatches: int = 4
    gamma: float | None = 0.99  # None: the game's discount (tabular)
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    vf_coef: float = 0.5
    alpha: float = 0.01  # entropy coefficient = Boltzmann temperature
    max_grad_norm: float = 0.5
    lr: float = 5e-4
    lr_schedule: LrSchedule = "linear"
    warmup: float = 0.05  # fraction of the updates spent warming up (warmup-cosine)
    adam_eps: float = 1e-5
    normalize_advantage: bool = True  # per minibatch (PureJaxRL); off keeps alpha a true temperature
    clip_value_loss: bool = True
    # the entries the actor and entropy terms and the advantage normalisation average over: "all" (the official
    # code: both seats of a Hanabi step, the waiting seat's forced no-op included) or "acting" (ers before 2026-11-27)
    loss_mean: LossMean = "all"
    advantage: AdvantageMode = "gae"  # "exact" (tabular only): all-actions gradient with ers-exact's Q - V
    shaped_reward_horizon: int = 0  # Overcooked: env steps over which the shaped reward anneals 1 -> 0 (0: 1)
    # network
    net: NetConfig = dataclasses.field(default_factory=NetConfig)
    # run
    seeds: tuple[int, ...] = (0,)
    device: str = "cpu"
    checkpoint_every: int = 10  # updates between checkpoints
    keep_checkpoints: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", checked_seeds(self.seeds))
        # very-small and Hanabi-Very-Small are one game: one name in every config, result and comparison
        object.__setattr__(self, "hanabi_preset", canonical_preset(self.hanabi_preset))
        if isinstance(self.net, dict):
            object.__setattr__(self, "net", NetConfig(**self.net))
        check_types(self)  # every Literal choice (collector, modes, lr_schedule, advantage, ...) and integer
        check_fields(
            self,
            num_envs=at_least(1),
            num_steps=at_least(1),
            total_env_steps=at_least(1),
            epochs=at_least(1),
            minibatches=at_least(1),
            gae_lambda=between(0, 1),
            clip_eps=positive,
            vf_coef=non_negative,
            alpha=non_negative,
            max_grad_norm=positive,
            lr=non_negative,
            warmup=between(0, 1),
            adam_eps=positive,
            shaped_reward_horizon=non_negative,
            checkpoint_every=at_least(1),
            keep_checkpoints=at_least(1),
        )
        problem = env_problem(self.env, need_file=False)  # a .dpomdp path by its form (env_problem)
        if problem is not None:
            raise UsageError(f"TrainConfig.env = {self.env!r} {problem}")
        if self.gamma is not None:
            check_fields(self, gamma=between(0, 1))
        if self.advantage == "exact" and self.env_kind != "tabular":
            raise UsageError(f"TrainConfig.advantage = 'exact' needs a tabular env, not {self.env!r}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise UsageError(f"TrainConfig.seeds = {self.seeds!r}: give distinct seeds")
        for name, module in (("bf16_gradients", "blas"), ("int8_inputs", "int8")):
            value = getattr(self, name)
            if not (type(value) is bool or value == "auto"):
                raise UsageError(f"TrainConfig.{name} = {value!r}: choose True, False or 'auto'")
            if value is True and str(self.device).split(":")[0] != "cpu":
                raise UsageError(
                    f"TrainConfig.{name} is for CPU products (ers_deep.nets.{module}), not device {self.device!r}"
                )
            if value is True and self.bf16_update:
                raise UsageError(
                    f"TrainConfig: bf16_update (autocast) rounds the products itself; pick one ({name})"
                )
        if self.net.kind == "cnn-gru" and self.env_kind != "overcooked-v2":
            raise UsageError(
                f"TrainConfig.net.kind = 'cnn-gru' reads Overcooked V2's grid, not {self.env!r}: use 'mlp'"
                + (" or 'tabular'" if self.env_kind == "tabular" else "")
            )

    # ---- derived ---------------------------------------------------------------------------------------------
    @property
    def steps_per_update(self) -> int:
        """Env steps per seed per update (num_envs x num_steps)."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        """Updates of the run: ``total_env_steps`` rounded down to whole updates, at least one (a run trains
        ``num_updates x steps_per_update`` env steps per seed, which can differ from ``total_env_steps``)."""
        return max(1, self.total_env_steps // self.steps_per_update)

    @property
    def env_kind(self) -> str:
        """``hanabi``, ``overcooked-v2`` or ``tabular``."""
        return self.env if self.env in ("hanabi", "overcooked-v2") else "tabular"

    @property
    def env_key(self) -> tuple[str, ...]:
        """What makes two configs' envs one env to a policy (its game and its observations): the env with
        Hanabi's preset and plausible-card features, Overcooked's layout and channels, or the tabular game."""
        if self.env_kind == "hanabi":
            return (self.env, self.hanabi_preset, self.hanabi_knowledge)
        if self.env_kind == "overcooked-v2":
            return (self.env, self.layout, "paper-obs" if self.paper_obs else "full-obs")
        return (self.env,)

    @property
    def game(self) -> str:
        """The game a result of this env names (``DiscoveryResult.game``, ``ZSCReport.game``): a tabular env's
        ``env`` as given (``tabular:NAME``, where ers-exact's results name the game ``NAME``, or a ``.dpomdp``
        path), ``hanabi:PRESET`` or ``overcooked-v2:LAYOUT``."""
        if self.env_kind == "tabular":
            return self.env
        return f"{self.env}:{self.layout if self.env_kind == 'overcooked-v2' else self.hanabi_preset}"

    @property
    def game_spec(self) -> str:
        """The ers-exact game of a tabular env (name or path)."""
        return self.env.removeprefix("tabular:")

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["seeds"] = list(self.seeds)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainConfig:
        data = dict(data)
        data.setdefault("loss_mean", "acting")  # a config written before the field: the loss it ran with
        data.setdefault("turn_streams", False)  # likewise: the minibatches it drew (whole games)
        data.setdefault("bf16_gradients", False)  # likewise: its float32 gradient products
        data.setdefault("int8_inputs", False)  # likewise: its float32 embedding
        data["net"] = NetConfig(**data["net"])
        data["seeds"] = tuple(data["seeds"])
        return cls(**data)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)


PAPER: dict[str, dict[str, Any]] = {
    "hanabi": {},
    "overcooked-v2": {
        "num_envs": 256,
        "num_steps": 256,
        "minibatches": 64,
        "max_grad_norm": 0.25,
        "lr": 2.5e-4,
        "lr_schedule": "warmup-cosine",
        "total_env_steps": 30_000_000,
        "shaped_reward_horizon": 15_000_000,
        "net": NetConfig(kind="cnn-gru", hidden=128),
    },
    "tabular": {
        "num_envs": 4096,
        "num_steps": 2,
        "minibatches": 1,
        "gamma": None,
        "gae_lambda": 1.0,
        "alpha": 0.25,
        "normalize_advantage": False,
        "clip_value_loss": False,
        "lr": 0.5,
        "lr_schedule": "linear",
        "max_grad_norm": 100.0,
        "total_env_steps": 4096 * 2 * 300,
        "net": NetConfig(kind="tabular", hidden=0),
    },
}


#: the endings of a .dpomdp path (``ers_exact.games.find_game_file``'s, case-insensitive)
DPOMDP_SUFFIXES = (".dpomdp", ".dpomdp.gz")


def env_problem(env: object, *, need_file: bool = True) -> str | None:
    """Why ``env`` names no env (None: it names one): ``hanabi``, ``overcooked-v2``, ``tabular:NAME`` (NAME a
    game of ers-exact's registry, ``ers_exact.games.GAMES``) or a .dpomdp file (``tabular:`` optional).

    ``need_file`` (``paper_config``, ``--env``: a new run): a .dpomdp path must name a file here, a missing one
    is ``find_game_file``'s FileNotFoundError naming it. Without it (``TrainConfig``'s own check) a path ending
    in .dpomdp or .dpomdp.gz is taken by its form: a config is also a stored run's record (run/config.json, a
    policy file's metadata, read by ``load_pool`` and ``read_run_config``), and the run's game file need not
    be on the machine that reads its results; the file is looked for where the game is read (``make_env``,
    ``load_game``: FileNotFoundError naming it). A registered name is always checked (the registry is
    everywhere), and a path of another ending only names a game as an existing file (``load_game``)."""
    from ers_exact.games import GAMES, find_game_file

    text = str(env)
    if text in ("hanabi", "overcooked-v2"):
        return None
    name = text.removeprefix("tabular:")
    if name.lower().replace("_", "-") in GAMES:
        return None
    if not need_file and name.lower().endswith(DPOMDP_SUFFIXES):
        return None
    try:
        if find_game_file(name) is not None:
            return None
    except IsADirectoryError:
        if need_file:
            raise
    return (
        f"is not an env: use hanabi, overcooked-v2, tabular:NAME (NAME in {', '.join(sorted(GAMES))}) or a "
        ".dpomdp path"
    )


def paper_config(env: str, **overrides: Any) -> TrainConfig:
    """The paper's settings for ``env`` (``hanabi``, ``overcooked-v2``, ``tabular:NAME`` / a .dpomdp path),
    with ``overrides``; an env that is none of these (``"chess"``) is a :class:`UsageError` listing the
    registered game names (:func:`env_problem`)."""
    problem = env_problem(env)
    if problem is not None:
        raise UsageError(f"paper_config: env {env!r} {problem}")
    kind = env if env in ("hanabi", "overcooked-v2") else "tabular"
    return TrainConfig(**{"env": env, **PAPER[kind], **overrides})


def make_env(config: TrainConfig, batch_size: int, seed: int, branch_free: bool | None = None) -> BatchedEnv:
    """The batched env of ``config`` with ``batch_size`` games (auto-reset on); ``branch_free``: the env's step
    style (None: the env's default, branch-free off CPU)."""
    from ers_deep.envs.hanabi import HanabiEnv
    from ers_deep.envs.overcooked_v2 import OvercookedV2Env
    from ers_deep.envs.tabular import TabularEnv

    dev = config.device
    if config.env == "hanabi":
        return HanabiEnv(
            config.hanabi_preset,
            batch_size=batch_size,
            device=dev,
            seed=seed,
            check_legal=False,
            branch_free=branch_free,
            knowledge=config.hanabi_knowledge,
        )
    if config.env == "overcooked-v2":
        return OvercookedV2Env(
            config.layout,
            batch_size=batch_size,
            device=dev,
            seed=seed,
            paper_obs=config.paper_obs,
            branch_free=branch_free,
        )
    return TabularEnv(
        config.game_spec,
        batch_size=batch_size,
        device=dev,
        seed=seed,
        check_legal=False,
        branch_free=branch_free,
    )
