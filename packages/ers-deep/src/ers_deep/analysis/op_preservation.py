"""Does a learned set preserve OP optimality? (The paper's "Preserves OP Optimality", item
"optimality within equivalence classes".) For a set Phi (identity included, as other-play uses it) and policies
pi trained to maximise OP^Phi, compare

    E_pi [ OP^Phi(pi) ]                  with     E_pi [ E_{phi in Phi} OP^Phi(phi(pi)) ],
    OP^Phi(pi) = mean_{psi in Phi} XP(pi, psi(pi)),   XP(pi_1, pi_2) = (J(pi_1, pi_2) + J(pi_2, pi_1)) / 2,

(``ers_exact.model.objectives.other_play``'s definition, both seat orders). The paper reports 23.59 +- 0.04 and
23.34 +- 0.05 in Hanabi with 11 learned symmetries and 5 OP policies: a phi(pi) is (almost) as good an OP policy
as pi itself.

* ``deep_op_preservation``: Monte-Carlo estimates with the learned phi networks (``games`` games per seat order
  of every pair): psi(phi(pi)) is ``compose([psi, phi])`` played as one symmetry. Per policy, its estimate and
  Monte-Carlo standard error; over the policies, the mean with its standard error across policies (``se``) and
  the Monte-Carlo error of that mean (``mc_se``).
* ``exact_op_preservation`` (tabular games): the same numbers exactly, with ers-exact -- the pool's exact
  policies (``train.exact.tabular_policies``) and every learned phi rounded to its nearest ers-exact
  transformation (the discovery's ``nearest``), Phi = {identity} + the rounded phi; for an ers-exact discovery
  result (which train-op also takes) its own transformations, each once, as other-play draws them.
* ``learned_exact_op_preservation`` (tabular games): the exact values of the *learned* phi networks: the
  exact policies that pi, phi(pi) and psi(phi(pi)) define on every local history, paired by ers-exact's
  ``cross_play``. The Monte-Carlo estimate converges to these; the rounded values above differ from them by
  the rounding (learned rows are softmax distributions, not permutations: on three-lever, entries of phi(pi)
  within 0.02 of the rounded image, OP values within a few hundredths).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ers_deep.crossplay import mean_se
from ers_deep.discovery import compose, exact_symmetries_for
from ers_deep.envs.symmetry import Symmetry
from ers_deep.envs.tabular import TabularEnv
from ers_deep.nets import masked_logits
from ers_deep.other_play import identity_symmetry, op_symmetries
from ers_deep.pools import Policy, Pool, PoolError
from ers_deep.train.config import TrainConfig, make_env
from ers_deep.train.evaluate import Agent, play
from ers_deep.train.exact import tabular_policies
from ers_exact.interface import DiscoveryResult, file_sha256
from ers_exact.model.objectives import cross_play, other_play
from ers_exact.model.transformation import Transformation, apply_to_policy
from ers_exact.util.output import save_figure

__all__ = [
    "deep_op_preservation",
    "discovery_folder",
    "exact_op_preservation",
    "learned_exact_op_preservation",
    "op_preservation",
    "preservation_figure",
    "summarise",
]

#: a pair value: (agent in seat 0, agent in seat 1, seed) -> (mean, standard error)
PairValue = Callable[[Agent, Agent, int], tuple[float, float]]


def _sampled(policy: Policy, games: int) -> PairValue:
    def value(a: Agent, b: Agent, seed: int) -> tuple[float, float]:
        r = play([a, b], policy.config, games, seed=seed)
        return float(r["mean"]), float(r["se"])

    return value


def _xp(value: PairValue, a: Agent, b: Agent, seed: int) -> tuple[float, float]:
    """XP(a, b): the mean over both seat orders and its standard error."""
    m1, s1 = value(a, b, seed)
    m2, s2 = value(b, a, seed + 1)
    return (m1 + m2) / 2, math.sqrt(s1**2 + s2**2) / 2


def _op(
    policy: Policy, outer: Symmetry | None, phis: Sequence[Symmetry], value: PairValue, seed: int
) -> tuple[float, float]:
    """OP^Phi(rho) for rho = outer(pi) (pi when None): mean over psi of XP(rho, psi(rho)), with its error."""
    rho: tuple[Symmetry, ...] = () if outer is None else (outer,)
    means, ses = [], []
    for k, psi in enumerate(phis):
        image = (psi,) if outer is None else (compose([psi, outer]),)
        m, s = _xp(value, Agent(policy.net, rho), Agent(policy.net, image), seed + 2 * k)
        means.append(m)
        ses.append(s)
    return float(np.mean(means)), math.sqrt(sum(s * s for s in ses)) / len(ses)


def _per_policy(policy: Policy, phis: Sequence[Symmetry], value: PairValue, seed: int) -> dict[str, Any]:
    op, op_se = _op(policy, None, phis, value, seed)
    shifted = [_op(policy, phi, phis, value, seed + 1000 * (k + 1)) for k, phi in enumerate(phis)]
    return {
        "policy": policy.name,
        "op": op,
        "op_mc_se": op_se,
        "shifted": float(np.mean([m for m, _ in shifted])),
        "shifted_mc_se": math.sqrt(sum(s * s for _, s in shifted)) / len(shifted),
        "shifted_by_phi": [m for m, _ in shifted],
    }


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean over policies of ``op`` and ``shifted`` with the standard error across policies (``se``) and the
    Monte-Carlo standard error of the mean (``mc_se``, 0 for exact values)."""
    out: dict[str, Any] = {}
    for key in ("op", "shifted"):
        vals = np.array([r[key] for r in rows], float)
        mc = [r.get(f"{key}_mc_se", 0.0) for r in rows]
        est = mean_se(vals)
        out[key] = {
            "value": est.value,
            "se": est.se,
            "mc_se": math.sqrt(sum(s * s for s in mc)) / len(mc),
        }
    out["gap"] = out["op"]["value"] - out["shifted"]["value"]
    return out


def deep_op_preservation(
    policies: Sequence[Policy], phis: Sequence[Symmetry], games: int, *, seed: int = 0
) -> dict[str, Any]:
    """Monte-Carlo OP^Phi(pi) and E_phi OP^Phi(phi(pi)) of every policy (module docstring)."""
    rows = [_per_policy(p, phis, _sampled(p, games), seed + 100_003 * n) for n, p in enumerate(policies)]
    return {"policies": rows, **summarise(rows), "games_per_seat_order": games}


@torch.no_grad()
def _exact_policy(env: TabularEnv, agent: Agent) -> tuple[np.ndarray, ...]:
    """The exact joint policy an agent (a net, possibly through a symmetry) defines on every local history."""
    obs = env.history_obs()
    K = obs.shape[0]
    first = torch.ones(K, dtype=torch.bool, device=obs.device)
    legal = env.legal_table()
    logits, _ = agent.logits(obs, first, agent.initial_state(K, obs.device), legal)
    return env.split_policy(torch.softmax(masked_logits(logits.double(), legal), -1))


def learned_exact_op_preservation(
    env: TabularEnv, policies: Sequence[Policy], phis: Sequence[Symmetry]
) -> dict[str, Any]:
    """The same quantities computed exactly for the learned phi networks on a tabular env: the exact policy
    of pi, phi(pi) and psi(phi(pi)) on every local history, and ers-exact's ``cross_play`` of each pair."""
    rows = []
    for p in policies:

        def op(outer: Symmetry | None, net: Any = p.net) -> float:
            rho = _exact_policy(env, Agent(net, () if outer is None else (outer,)))
            images = [(psi,) if outer is None else (compose([psi, outer]),) for psi in phis]
            return float(
                np.mean([cross_play(env.tree, rho, _exact_policy(env, Agent(net, i))) for i in images])
            )

        shifted = [op(phi) for phi in phis]
        rows.append(
            {"policy": p.name, "op": op(None), "shifted": float(np.mean(shifted)), "shifted_by_phi": shifted}
        )
    return {"policies": rows, **summarise(rows)}


def exact_op_preservation(
    env: TabularEnv, policies: Sequence[Policy], transformations: Sequence[Transformation]
) -> dict[str, Any]:
    """ers-exact's OP^Phi(pi) and E_phi OP^Phi(phi(pi)) for the exact policies of ``policies`` and Phi =
    ``transformations`` (ers-exact transformations; include the identity)."""
    tree = env.tree
    rows = []
    for p in policies:
        pi = tabular_policies(p.net, env)[0]
        op = float(other_play(tree, pi, transformations))
        shifted = [
            float(other_play(tree, apply_to_policy(tree, phi, pi), transformations))
            for phi in transformations
        ]
        rows.append(
            {
                "policy": p.name,
                "op": op,
                "shifted": float(np.mean(shifted)),
                "shifted_by_phi": shifted,
            }
        )
    return {"policies": rows, **summarise(rows), "transformations": [t.to_json() for t in transformations]}


def preservation_figure(result: dict[str, Any], path: str | Path, title: str = "") -> Path:
    """Per policy (and their mean, last), OP^Phi(pi) and E_phi OP^Phi(phi(pi)) side by side: the Monte-Carlo
    estimates with 2-SE error bars, the exact values of the learned phi (open circles) and ers-exact's with the
    rounded phi (black dashes) when present; the y axis is zoomed onto the values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    deep = result["deep"]
    rows = deep["policies"]
    names = [r["policy"].split("/")[-1] for r in rows] + ["mean"]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(2.2 + 0.8 * len(names), 3.2), dpi=100)
    styles = (
        ("op", -0.15, "C0", r"$\mathrm{OP}^\Phi(\pi)$"),
        ("shifted", 0.15, "C1", r"$E_\phi\,\mathrm{OP}^\Phi(\phi(\pi))$"),
    )
    for key, off, colour, label in styles:
        vals = [r[key] for r in rows] + [deep[key]["value"]]
        # a policy's bar: its Monte-Carlo error; the mean's: the standard error across policies, the "+-" the
        # command prints and the paper reports (its Monte-Carlo error alone where one policy leaves it undefined)
        across = deep[key].get("se")
        mean_se = across if isinstance(across, float) and math.isfinite(across) else deep[key]["mc_se"]
        errs = [2 * r[f"{key}_mc_se"] for r in rows] + [2 * mean_se]
        ax.errorbar(
            x + off, vals, errs, fmt="o", color=colour, ms=4, capsize=3, label=f"{label}, deep (2 SE)"
        )
        for column, marker in (("learned_exact", "o"), ("exact", "_")):
            if result.get(column):
                ex = [r[key] for r in result[column]["policies"]] + [result[column][key]["value"]]
                face = "none" if marker == "o" else "k"
                which = "exact, learned phi" if column == "learned_exact" else "ers-exact, rounded phi"
                ax.plot(x + off, ex, marker, mfc=face, mec="k", color="k", ms=9 if marker == "o" else 14,
                        mew=1.2, ls="none", label=which if key == "op" else None)  # fmt: skip
    ax.set_xticks(x, names, fontsize=7)
    ax.set_ylabel("expected return", fontsize=8)
    ax.set_title(title or "OP optimality under the learned set", fontsize=9)
    ax.legend(fontsize=6)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return Path(path)


def discovery_folder(path: str | Path) -> Path:
    """The discovery output folder of ``path`` (the folder or its discovery.json); ``PoolError`` naming it
    when there is no discovery.json."""
    folder = Path(path)
    folder = folder.parent if folder.suffix == ".json" else folder
    if not (folder / "discovery.json").is_file():
        raise PoolError(f"--discovery {path}: no discovery.json there (an ers-deep discover --out folder)")
    return folder


def op_preservation(discovery: str | Path, pool: Pool, games: int, *, seed: int = 0) -> dict[str, Any]:
    """The whole analysis for a discovery output and a pool of OP^Phi policies (module docstring): Phi =
    identity + the discovery's learned symmetries (``other_play.op_symmetries``, as OP trains with it);
    ``deep`` always, ``learned_exact`` and ``exact`` on tabular games (``exact`` is None, with ``exact_note``
    saying why, when some learned phi rounds to no ers-exact transformation). ``pool_trained_with_set`` says
    whether pool.json records other-play with exactly this discovery output (its SHA-256)."""
    folder = discovery_folder(discovery)
    config = pool.policies[0].config
    phis = op_symmetries(config, str(folder))
    record = pool.info.get("other_play") or {}
    out: dict[str, Any] = {
        "pool": str(pool.path),
        "discovery": str(folder),
        "symmetries": [s.name for s in phis],
        "pool_trained_with_set": record.get("discovery_sha256") == file_sha256(folder / "discovery.json"),
        "deep": deep_op_preservation(pool.policies, phis, games, seed=seed),
    }
    env = make_env(config, 1, seed=0)
    if isinstance(env, TabularEnv):
        out["learned_exact"] = learned_exact_op_preservation(env, pool.policies, phis)
        exact_phis = _exact_set(env, config, folder)
        if exact_phis is not None:
            out["exact"] = exact_op_preservation(env, pool.policies, exact_phis)
        else:
            out["exact"] = None
            out["exact_note"] = "some learned phi rounds to no ers-exact transformation"
    return out


def _exact_set(env: TabularEnv, config: TrainConfig, folder: Path) -> list[Transformation] | None:
    """Phi as ers-exact transformations, element for element the set other-play draws from
    (``other_play.op_symmetries``): the identity, then for a deep discovery each learned phi's rounding
    (``nearest``; None where one has none), for an ers-exact result its transformations themselves, each once
    (op_symmetries drops the repeats and the identity by their index maps, compared here the same way)."""
    result = DiscoveryResult.from_json(json.loads((folder / "discovery.json").read_text()))
    out = [Transformation.identity(env.game)]
    maps = exact_symmetries_for(config, folder)
    if maps is None:  # learned by ers-deep
        nearest = [getattr(t, "nearest", None) for t in result.transformations]
        rounded = [t for t in nearest if isinstance(t, Transformation)]
        return out + rounded if len(rounded) == len(nearest) else None
    kept = [identity_symmetry(config).to("cpu")]
    exact = [t for t in result.transformations if isinstance(t, Transformation)]  # all of them (checked)
    for t, m in zip(exact, maps):
        if not any(
            torch.equal(m.obs_index, k.obs_index) and torch.equal(m.action_index, k.action_index)
            for k in kept
        ):
            kept.append(m)
            out.append(t)
    return out
