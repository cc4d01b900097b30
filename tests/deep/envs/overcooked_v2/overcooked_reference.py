"""Reference rollouts of JaxMARL's overcooked_v2, dumped to .npz for the differential test.

Run with an interpreter that has ``jaxmarl`` (e.g. /tmp/jaxvenv/bin/python); this file imports no ers code.
``python overcooked_reference.py OUT.npz --layout grounded_coord_simple --envs 200 --steps 400 --seed 0``

Every step replicates ``MultiAgentEnv.step`` (step_env, then a reset selected where done) and records the
pre-reset state (``st_*``) and observation, rewards, dones, and the post-reset state (``nx_*``) and obs.
Actions are random (interact with probability ``--p-interact``, else uniform over the 5 others).
"""

from __future__ import annotations

import argparse

import numpy as np


def _flat(state) -> dict:
    g = state.grid  # [..., H, W, 3]
    return {
        "pos": np.stack([np.asarray(state.agents.pos.x), np.asarray(state.agents.pos.y)], -1),
        "dir": np.asarray(state.agents.dir),
        "inv": np.asarray(state.agents.inventory),
        "items": np.asarray(g[..., 1]),
        "extra": np.asarray(g[..., 2]),
        "recipe": np.asarray(state.recipe),
        "step": np.asarray(state.step),
        "ncd": np.asarray(state.new_correct_delivery),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layout", default="grounded_coord_simple")
    ap.add_argument("--envs", type=int, default=200)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--p-interact", type=float, default=0.3)
    ap.add_argument("--random-reset", action="store_true")
    ap.add_argument("--view", type=int, default=2, help="view radius; 0 for the full grid")
    a = ap.parse_args()

    import jax
    import jax.numpy as jnp
    from jaxmarl.environments.overcooked_v2.overcooked import OvercookedV2

    env = OvercookedV2(
        layout=a.layout,
        agent_view_size=a.view or None,
        negative_rewards=True,
        sample_recipe_on_delivery=True,
        random_agent_positions=True,
        random_reset=a.random_reset,
    )
    names = env.agents
    rng = np.random.default_rng(a.seed)
    other = rng.integers(0, 5, size=(a.steps, a.envs, len(names)))
    acts = np.where(rng.random((a.steps, a.envs, len(names))) < a.p_interact, 5, other).astype(np.int32)

    def one_step(key, state, act):
        key, key_reset = jax.random.split(key)
        obs_st, st, rew, dones, info = env.step_env(key, state, {n: act[i] for i, n in enumerate(names)})
        obs_re, st_re = env.reset(key_reset)
        d = dones["__all__"]
        nx = jax.tree.map(lambda x, y: jax.lax.select(d, x, y), st_re, st)
        obs_nx = jax.tree.map(lambda x, y: jax.lax.select(d, x, y), obs_re, obs_st)
        stack = lambda o: jnp.stack([o[n] for n in names])  # noqa: E731
        shaped = jnp.stack([info["shaped_reward"][n] for n in names])
        return nx, (st, stack(obs_st), rew[names[0]], shaped, d, nx, stack(obs_nx))

    @jax.jit
    def rollout(keys, acts):
        obs0, s0 = jax.vmap(env.reset)(keys[0])

        def body(state, x):
            k, act = x
            return jax.vmap(one_step)(k, state, act)

        _, out = jax.lax.scan(body, s0, (keys[1:], acts))
        return s0, jax.vmap(lambda o: jnp.stack([o[n] for n in names]))(obs0), out

    keys = jax.random.split(jax.random.PRNGKey(a.seed), (a.steps + 1, a.envs))
    s0, obs0, (st, obs_st, rew, shaped, done, nx, obs_nx) = rollout(keys, jnp.asarray(acts))
    data = {
        "actions": acts,
        "obs0": np.asarray(obs0, np.int8),
        "obs_st": np.asarray(obs_st, np.int8),
        "obs_nx": np.asarray(obs_nx, np.int8),
        "reward": np.asarray(rew),
        "shaped": np.asarray(shaped),
        "done": np.asarray(done),
    }
    for prefix, s in (("s0", s0), ("st", st), ("nx", nx)):
        data.update({f"{prefix}_{k}": v for k, v in _flat(s).items()})
    np.savez_compressed(a.out, **data)


if __name__ == "__main__":
    main()
