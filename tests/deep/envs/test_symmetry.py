"""``IndexSymmetry``: both envs build their symmetries as it; its gathers form a group (inverse, compose)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ers_deep.envs import HanabiConfig, IndexSymmetry, OvercookedV2Env
from ers_deep.envs.hanabi.symmetry import colour_permutation
from ers_deep.envs.overcooked_v2.symmetry import find_vertical_symmetry
from ers_deep.envs.symmetry import relabel_index, stack_symmetries


def _hanabi() -> IndexSymmetry:
    return colour_permutation(HanabiConfig(), (1, 2, 0, 4, 3))


def _overcooked() -> IndexSymmetry:
    sym = find_vertical_symmetry(OvercookedV2Env("grounded_coord_simple"))
    assert sym is not None
    return sym


ENV_SYMMETRIES = [pytest.param(_hanabi, id="hanabi-colours"), pytest.param(_overcooked, id="overcooked-flip")]


@pytest.mark.parametrize("make", ENV_SYMMETRIES)
def test_env_symmetries_are_index_symmetries(make: object) -> None:
    sym = make()  # type: ignore[operator]
    assert isinstance(sym, IndexSymmetry) and not sym.is_identity()
    assert sym.compose(sym.inverse()).is_identity() and sym.inverse().compose(sym).is_identity()
    assert sym.to("cpu") is sym
    g = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 100, (3, 2, *sym.obs_shape), generator=g)  # [B, P, *O]
    assert torch.equal(sym.inverse().apply_obs(sym.apply_obs(obs)), obs)
    flat = obs.reshape(3, 2, -1)
    assert torch.equal(sym.apply_obs(obs).reshape(3, 2, -1), flat[..., sym.obs_index])
    A = sym.action_index.numel()
    actions = torch.randint(0, A, (3, 2), generator=g)
    onehot = torch.nn.functional.one_hot(actions, A).bool()
    mapped = torch.nn.functional.one_hot(sym.apply_actions(actions), A).bool()
    assert torch.equal(sym.apply_legal(onehot), mapped)  # legal masks and actions move together


def _random_symmetry(data: st.DataObject, n: int, a: int, labels: int) -> IndexSymmetry:
    perm = lambda k: data.draw(st.permutations(list(range(k))))  # noqa: E731
    return IndexSymmetry(torch.tensor(perm(n)), torch.tensor(perm(a)), "s", (n,), tuple(perm(labels)))


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_group_laws(data: st.DataObject) -> None:
    p, q, r = (_random_symmetry(data, 7, 4, 3) for _ in range(3))
    obs = torch.arange(7) * 10
    assert torch.equal(p.compose(q).apply_obs(obs), q.apply_obs(p.apply_obs(obs)))
    actions = torch.arange(4)
    assert torch.equal(p.compose(q).apply_actions(actions), q.apply_actions(p.apply_actions(actions)))
    left, right = p.compose(q).compose(r), p.compose(q.compose(r))
    assert torch.equal(left.obs_index, right.obs_index) and torch.equal(left.action_index, right.action_index)
    assert left.label_perm == right.label_perm
    assert p.compose(p.inverse()).is_identity()


def test_validation_and_helpers() -> None:
    with pytest.raises(ValueError, match="obs_index"):
        IndexSymmetry(torch.tensor([0, 0, 1]), torch.tensor([0, 1]), "bad", (3,))
    with pytest.raises(ValueError, match="action_index"):
        IndexSymmetry(torch.tensor([0, 1, 2]), torch.tensor([1, 1]), "bad", (3,))
    with pytest.raises(ValueError, match="obs_index"):
        IndexSymmetry(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), "bad", (4,))
    # relabelling a <-> b: the feature at a's position moves to b's, so mapped = original[index]
    index = relabel_index(["a", "b", "c"], {"a": "b", "b": "a", "c": "c"}.__getitem__)
    assert np.array_equal(index, [1, 0, 2])
    with pytest.raises(ValueError, match="leaves"):
        relabel_index(["a", "b"], lambda x: x + "!")
    stacked = stack_symmetries([_hanabi(), _hanabi().inverse()])
    assert stacked["obs_index"].shape == (2, 658) and stacked["action_map"].shape == (2, 20)
