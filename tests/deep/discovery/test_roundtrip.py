"""What ``discover`` writes reads back: discovery.json as a DiscoveryResult, symmetries.safetensors through
``load_symmetries`` (hash-checked against the JSON; a tampered or missing file is refused, naming it)."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from ers_deep.discovery import load_symmetries
from ers_deep.discovery.net import observation_rows
from ers_deep.discovery.rounding import round_tabular
from ers_deep.envs.tabular import TabularEnv
from ers_exact.interface import ArtifactError, DiscoveryResult, LearnedTransformation, file_sha256


def test_discovery_json_loads_as_the_result(toy_discovery: tuple[Path, DiscoveryResult]) -> None:
    out, result = toy_discovery
    assert {"discovery.json", "discovery-config.json", "symmetries.safetensors", "run"} <= {
        p.name for p in out.iterdir()
    }
    loaded = DiscoveryResult.from_json(json.loads((out / "discovery.json").read_text()))
    assert loaded == result and loaded.config == result.config
    assert DiscoveryResult.from_json(loaded.to_json()) == loaded
    digest = file_sha256(out / "symmetries.safetensors")
    for r, t in enumerate(loaded.transformations):
        assert isinstance(t, LearnedTransformation)
        assert (t.checkpoint, t.key, t.sha256) == ("symmetries.safetensors", f"phi/{r}/", digest)
        assert t.known is None  # tabular: ers-exact judges the rounding (config["exact"]), no known group
    assert loaded.permutations() == tuple(t.nearest for t in loaded.transformations)  # type: ignore[union-attr]
    assert json.loads((out / "discovery-config.json").read_text())["candidates"] == 3


def test_load_symmetries_gives_back_the_kept_maps(toy_discovery: tuple[Path, DiscoveryResult]) -> None:
    out, result = toy_discovery
    env = TabularEnv("toy-coordination")
    for source in (out, out / "discovery.json"):
        syms = load_symmetries(source)
        learned = [t for t in result.transformations if isinstance(t, LearnedTransformation)]
        assert [s.name for s in syms] == [t.name for t in learned] and len(learned) == 2
        for sym, t in zip(syms, learned):
            assert tuple(sym.action_map.tolist()) == t.action_map
            perm, dist, exact = round_tabular(env, sym)  # the loaded maps round as the saved ones did
            assert (perm, exact) == (t.obs_permutation, t.nearest)
            assert dist == pytest.approx(t.distance, rel=1e-6, abs=1e-9)
            obs = env.history_obs()
            assert torch.isfinite(sym.apply_obs(obs)).all()


def test_load_symmetries_rejects_a_tampered_file(
    toy_discovery: tuple[Path, DiscoveryResult], tmp_path: Path
) -> None:
    out = tmp_path / "copy"
    shutil.copytree(toy_discovery[0], out, ignore=shutil.ignore_patterns("run"))
    file = out / "symmetries.safetensors"
    data = bytearray(file.read_bytes())
    data[-3] ^= 0x01  # one bit of the last tensor's data
    file.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"symmetries\.safetensors") as err:
        load_symmetries(out)
    assert str(file) in str(err.value) and "SHA-256" in str(err.value)
    file.unlink()
    with pytest.raises(ArtifactError, match="not found") as err:
        load_symmetries(out)
    assert str(file) in str(err.value)


def test_load_symmetries_reads_the_file_once(
    toy_discovery: tuple[Path, DiscoveryResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The symmetries file was opened and hashed twice (``LearnedTransformation.verify``, then the checkpoint
    reader); it is read once, its digest taken of the bytes that are parsed."""
    import os

    out, _ = toy_discovery
    opened: list[str] = []
    real_open = os.open

    def counting_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    assert len(load_symmetries(out)) == 2
    assert [p for p in opened if p.endswith("symmetries.safetensors")] == [
        str(out / "symmetries.safetensors")
    ]


def test_save_symmetries_hashes_the_bytes_it_writes(
    toy_discovery: tuple[Path, DiscoveryResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest ``save_symmetries`` returns (discovery.json records it) is of the bytes written, not of the file
    read back (``file_sha256`` reread it)."""
    from ers_deep.discovery import files
    from ers_exact.util import files as exact_files

    def reread(path: object) -> str:
        raise AssertionError(f"{path} read back to hash it")

    syms = load_symmetries(toy_discovery[0])
    monkeypatch.setattr(exact_files, "file_sha256", reread)
    monkeypatch.setattr(files, "file_sha256", reread, raising=False)
    path, sha = files.save_symmetries(tmp_path, syms, {"env": "tabular:toy-coordination", "obs_shape": [10]})
    monkeypatch.undo()
    assert path == tmp_path / "symmetries.safetensors" and sha == file_sha256(path)


def test_rounding_beyond_the_enumerated_sizes_takes_the_nearest_permutation(
    toy_discovery: tuple[Path, DiscoveryResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """|O|! candidates were enumerated at any size (11 observations: 40M rows, a MemoryError). Above
    MAX_ENUMERATED_OBSERVATIONS the linear assignment's permutation is taken: checked here, on the toy game with
    the bound lowered to 0, against the enumeration's nearest candidate (its distance is the smallest of all)."""
    from ers_deep.discovery import rounding

    out, _ = toy_discovery
    env = TabularEnv("toy-coordination")
    for sym in load_symmetries(out):
        n_o = env.n_observations
        rows = observation_rows(sym.obs_map, torch.eye(n_o)[None])[0].double().detach().numpy()
        brute = min(
            float(((rows - np.eye(n_o)[list(p)]) ** 2).sum()) / n_o
            for p in itertools.permutations(range(n_o))
        )
        monkeypatch.setattr(rounding, "MAX_ENUMERATED_OBSERVATIONS", 0)
        perm, dist, exact = round_tabular(env, sym)
        monkeypatch.undo()
        assert dist == pytest.approx(brute, abs=1e-12) and sorted(perm) == list(range(n_o))
        assert exact is not None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_map_on_cuda_rounds_as_on_the_cpu(toy_discovery: tuple[Path, DiscoveryResult]) -> None:
    """A CUDA learner's kept map is on CUDA when discovery rounds it (``DiscoveryNet.symmetry``): the one-hot
    rows are built on the map's device (they were built on the CPU, a device mismatch before discovery.json)."""
    from dataclasses import replace

    out, _ = toy_discovery
    env = TabularEnv("toy-coordination")
    for sym in load_symmetries(out):
        cuda = replace(sym, obs_map=sym.obs_map.select(0).to("cuda"), action_map=sym.action_map.to("cuda"))
        perm, dist, _ = round_tabular(env, cuda)
        want = round_tabular(env, sym)
        assert perm == want[0] and dist == pytest.approx(want[1], abs=1e-6)
