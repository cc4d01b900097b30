"""Learned transformations in the shared interface (:class:`ers_exact.interface.LearnedTransformation`):
JSON round trips, discovery results mixing exact and learned transformations, and checkpoint hashes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ers_exact.interface import (
    ArtifactError,
    DiscoveryResult,
    LearnedTransformation,
    SymmetryMatch,
    Transformation,
    file_sha256,
)
from ers_exact.util.errors import InputError

SWAP = Transformation((0, 1, 2, 3), ((1, 0), (1, 0)), ((1, 0, 2), (1, 0, 2)))
IDENT = Transformation((0, 1, 2, 3), ((0, 1), (0, 1)), ((0, 1, 2), (0, 1, 2)))


def _learned(**kw: object) -> LearnedTransformation:
    base: dict[str, object] = {
        "name": "phi-0",
        "checkpoint": "discovery/phi.safetensors",
        "sha256": "0" * 64,
        "key": "phi.0",
        "action_map": (1, 0),
    }
    return LearnedTransformation(**{**base, **kw})


def _round_trip(t: LearnedTransformation) -> LearnedTransformation:
    return LearnedTransformation.from_json(json.loads(json.dumps(t.to_json(), allow_nan=False)))


def test_learned_json_round_trip_full() -> None:
    t = _learned(obs_permutation=(1, 0, 2), distance=0.125, nearest=SWAP)
    data = t.to_json()
    assert data["kind"] == "learned" and data["nearest"] == SWAP.to_json()
    assert _round_trip(t) == t


def test_learned_json_round_trip_bare() -> None:
    """No rounding: obs_permutation and nearest None, distance NaN (written as null, read back NaN)."""
    t = _learned()
    data = t.to_json()
    assert data["obs_permutation"] is None and data["nearest"] is None and data["distance"] is None
    again = _round_trip(t)
    assert math.isnan(again.distance) and again.nearest is None and again.obs_permutation is None
    # NaN != NaN, so compare every other field
    assert again.to_json() == data
    assert {k: v for k, v in vars(again).items() if k != "distance"} == {
        k: v for k, v in vars(t).items() if k != "distance"
    }


@pytest.mark.parametrize(
    ("known", "match"),
    [
        pytest.param(SymmetryMatch(3, "colours(1, 2, 0)", 1.0, True, 602), "colours(1, 2, 0)", id="match"),
        pytest.param(SymmetryMatch(0, "identity", 1.0, False, 16), None, id="other-actions"),
        pytest.param(SymmetryMatch(0, "identity", 0.875, True, 16), None, id="nearest"),
        pytest.param(
            SymmetryMatch(1, "vertical-flip(1, 0, 2)", math.nan, True, 0), None, id="nothing-varies"
        ),
    ],
)
def test_learned_json_round_trip_with_the_known_symmetry(known: SymmetryMatch, match: str | None) -> None:
    t = _learned(obs_permutation=(1, 0, 2), distance=0.01, known=known)
    data = json.loads(json.dumps(t.to_json(), allow_nan=False))
    assert known.match == data["known"]["match"] == match
    assert _round_trip(t) == t and hash(_round_trip(t)) == hash(t)
    result = _result((t,))
    assert DiscoveryResult.from_json(json.loads(json.dumps(result.to_json(), allow_nan=False))) == result


def test_old_learned_records_without_the_known_symmetry_still_load() -> None:
    """discovery.json written before ``known`` was recorded: no key, read as None (not checked)."""
    t = _learned(obs_permutation=(1, 0, 2), distance=0.01)
    old = t.to_json()
    del old["known"]
    loaded = _result((LearnedTransformation.from_json(old),))
    assert loaded.transformations[0] == t and loaded.transformations[0].known is None  # type: ignore[union-attr]
    data = {**_result((t,)).to_json(), "transformations": [old]}
    assert DiscoveryResult.from_json(data) == _result((t,))


def _result(transformations: tuple) -> DiscoveryResult:
    return DiscoveryResult(
        game="toy-coordination",
        algorithm="deep-sp-max",
        transformations=transformations,
        scores=tuple(0.5 for _ in transformations),
        pool_return=0.9,
        J_1=0.8,
        J_2=0.7,
        J_3=0.6,
        reconstruction_loss=0.01,
        config={"seed": 3},
    )


def test_mixed_discovery_result_round_trips() -> None:
    learned = _learned(obs_permutation=(1, 0, 2), distance=0.0, nearest=SWAP)
    result = _result((IDENT, learned))
    again = DiscoveryResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again == result
    assert isinstance(again.transformations[0], Transformation)
    assert isinstance(again.transformations[1], LearnedTransformation)
    assert again.permutations() == (IDENT, SWAP)


def test_permutations_refuse_a_learned_transformation_without_nearest() -> None:
    result = _result((IDENT, _learned(name="unrounded")))
    with pytest.raises(ArtifactError, match="'unrounded'"):
        result.permutations()
    assert issubclass(ArtifactError, InputError)


def test_old_discovery_json_without_kind_still_loads() -> None:
    old = {
        "game": "toy-coordination",
        "algorithm": "sp-max",
        "transformations": [SWAP.to_json(), IDENT.to_json()],  # no "kind" key
        "scores": [0.9, 0.8],
        "pool_return": 0.9,
        "J_1": 0.9,
        "J_2": 0.9,
        "J_3": 0.9,
        "reconstruction_loss": 0.0,
    }
    assert "kind" not in old["transformations"][0]
    result = DiscoveryResult.from_json(old)
    assert result.transformations == (SWAP, IDENT)
    assert result.permutations() == (SWAP, IDENT) and result.config == {}


@pytest.fixture
def checkpoint(tmp_path: Path) -> tuple[Path, LearnedTransformation]:
    path = tmp_path / "runs" / "phi.safetensors"
    path.parent.mkdir()
    path.write_bytes(bytes(range(256)) * 4)
    return path, _learned(checkpoint="runs/phi.safetensors", sha256=file_sha256(path))


def test_verify_accepts_the_recorded_checkpoint(checkpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    path, t = checkpoint
    base = path.parent.parent
    assert t.verify(base) == path
    monkeypatch.chdir(base)  # no base: relative to the working directory
    assert t.verify().resolve() == path.resolve()
    # an absolute path or one with "..": read anywhere before (a discovery.json may come from a stranger)
    absolute = _learned(checkpoint=str(path), sha256=t.sha256)
    up = _learned(checkpoint="../x", sha256=t.sha256)
    for learned, where in ((absolute, None), (absolute, base), (up, base)):
        with pytest.raises(ArtifactError, match="no file inside"):
            learned.verify(where)


def test_verify_refuses_a_missing_checkpoint(checkpoint) -> None:
    path, t = checkpoint
    path.unlink()
    with pytest.raises(ArtifactError, match=r"phi\.safetensors.*not found"):
        t.verify(path.parent.parent)


def test_verify_refuses_an_altered_checkpoint(checkpoint) -> None:
    path, t = checkpoint
    data = bytearray(path.read_bytes())
    data[100] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"phi\.safetensors: SHA-256 differs"):
        t.verify(path.parent.parent)


def test_read_checkpoint_gives_the_bytes_it_hashed(checkpoint) -> None:
    path, t = checkpoint
    assert t.read_checkpoint(path.parent.parent) == (path, path.read_bytes())


def test_verify_refuses_a_checkpoint_over_the_size_cap(checkpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify hashed a file of any size (a checkpoint named by a stranger's discovery.json: a huge file was read to
    its end); it reads at most ``MAX_FILE_BYTES``, as ers-deep's policy files are."""
    from ers_exact.util import files

    path, t = checkpoint
    monkeypatch.setattr(files, "MAX_FILE_BYTES", path.stat().st_size - 1)
    with pytest.raises(ArtifactError, match=r"phi\.safetensors: larger than \d+ bytes"):
        t.verify(path.parent.parent)


def test_verify_refuses_a_link_leading_out(checkpoint, tmp_path: Path) -> None:
    path, t = checkpoint
    base = tmp_path / "out"
    base.mkdir()
    (base / "runs").symlink_to(path.parent)
    with pytest.raises(ArtifactError, match="leads out of"):
        t.verify(base)
