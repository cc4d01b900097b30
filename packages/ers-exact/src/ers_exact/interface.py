"""The interface shared by ers-exact and ers-deep (torch-free): transformations, discovery results and
zero-shot-coordination reports. Frozen dataclasses with a JSON round trip, so a benchmark can run both
halves on the same game and compare their outputs field by field.

* :class:`~ers_exact.model.transformation.Transformation` -- phi = (phi_S, phi_A^i, phi_O^i) as permutations.
* :class:`LearnedTransformation` -- what deep discovery learns: phi_O is a network (stored in a safetensors
  checkpoint, named by path and SHA-256), phi_A an action map, plus the exact transformation it rounds to
  when one exists (``nearest``, with its ``distance``), so ers-exact can score a rounded deep result exactly,
  and on envs with known Dec-POMDP symmetries (Hanabi, Overcooked V2) how its rounding compares with them.
* :class:`SymmetryMatch` -- that comparison: the env's known symmetry nearest the rounding, whether the rounding
  is that symmetry, and on what fraction of the varying observation features they agree.
* :class:`DiscoveryResult` -- the l best learned transformations with their scores (mean J(phi(pi)) over
  the pool, eq. sp-max) and the paper's Table 2 group metrics: J_1, J_2, J_3 (expected return after
  composing 1-3 random learned transformations) and the relative reconstruction loss.
* :class:`ZSCReport` -- per population the columns of the paper's Table 1: SP, XP mean, XP median
  (XP(*)), XP(*) after symmetrising with Phi_MDP and with Phi_ER, each with a standard error; and the
  OP objective of the deployed policies (mean and standard error), Phi being the set the population
  trains OP with (OP + Phi_MDP: Phi_MDP; OP + learned Phi_ER: {Id} united with each agent's own learned
  set, which XP(*)+ER symmetrises with too) and, for the self-play population, which trains no OP, Phi_MDP
  (how much its conventions break the Dec-POMDP symmetries). Reports written before the OP column load
  with ``op = None``. Its ``config`` names the deployment rule ``select_by``, the OP score's reading
  ``op_reading`` and the OP column's ``op_column_reading`` (:mod:`ers_exact.deployment`; a report with an OP
  column written before that field loads with the reading its code computed, ``"seatings"``).

:class:`ZSCReport`, :class:`PopulationRow` and :class:`Estimate` are defined in :mod:`ers_exact.zsc_report` and
re-exported here; the NaN-aware equality of these results is :mod:`ers_exact.util.nan_equality`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ers_exact.model.transformation import Transformation
from ers_exact.symmetry_match import SymmetryMatch
from ers_exact.util.errors import InputError
from ers_exact.util.fields import null_as_nan, permutation, real, sequence, text
from ers_exact.util.files import file_sha256, read_confined
from ers_exact.util.nan_equality import nan_equal, nan_hash
from ers_exact.util.output import dumps as strict_dumps
from ers_exact.util.records import read_record
from ers_exact.zsc_report import Estimate, PopulationRow, ZSCReport

__all__ = [
    "AnyTransformation",
    "ArtifactError",
    "DiscoveryResult",
    "Estimate",
    "LearnedTransformation",
    "PopulationRow",
    "SymmetryMatch",
    "Transformation",
    "ZSCReport",
    "file_sha256",
]


_SHA256 = re.compile(r"[0-9a-f]{64}")
_LEARNED_KEYS = ("name", "checkpoint", "sha256", "key", "action_map")
_LEARNED_LATER = ("kind", "obs_permutation", "distance", "nearest", "known")  # may be absent
_RESULT_KEYS = (
    *("game", "algorithm", "transformations", "scores", "pool_return"),
    *("J_1", "J_2", "J_3", "reconstruction_loss"),
)


class ArtifactError(ValueError, InputError):
    """A learned transformation whose checkpoint is missing or does not match its recorded hash."""


@dataclass(frozen=True)
class LearnedTransformation:
    """phi = (phi_A, phi_O) learned by ers-deep (torch-free record).

    phi_O is a network stored in ``checkpoint`` (safetensors; ``sha256`` of its bytes, ``key`` the tensor
    prefix of this transformation inside it); phi_A is ``action_map``: phi(pi)(a | o) = pi(action_map[a] |
    phi_O(o)): where the original plays c, the mapped policy plays ``action_map.index(c)`` (so ``action_map`` sends
    the mapped game's actions to the original's, not the other way; the two readings differ for a
    non-involution, e.g. a 3-cycle).
    ``obs_permutation`` is the index permutation nearest to phi_O when the rounding gives a permutation: on
    observation features the gather phi_O(o)[k] ~ o[perm[k]], with ``distance`` the relative squared distance
    E||phi_O(o) - o[perm]||^2 / E||o||^2 over the observations it was measured on; on tabular envs the map of
    observation indices o -> perm[o] (phi_O(e_o) ~ e_perm[o], the inverse of the gather's reading where perm is
    not an involution), with ``distance`` sum_o ||phi_O(e_o) - e_perm[o]||^2 / |O|;
    ``nearest`` is the ers-exact transformation it rounds to (tabular games only), None otherwise: T^-1 for
    T = (the identity on states, phi_A on each agent's actions, ``obs_permutation`` on each agent's
    observations), since phi(pi)(a | tau) = pi(phi_A(a) | T(tau)) is ers-exact's T^-1(pi); ``known``
    compares the rounding with the env's known Dec-POMDP symmetries (Hanabi, Overcooked V2; None on tabular
    games, which ``nearest`` covers, and in files written before it was recorded)."""

    name: str
    checkpoint: str
    sha256: str
    key: str
    action_map: tuple[int, ...]
    obs_permutation: tuple[int, ...] | None = None
    distance: float = math.nan
    nearest: Transformation | None = None
    known: SymmetryMatch | None = None

    __eq__ = nan_equal
    __hash__ = nan_hash

    def __post_init__(self) -> None:
        """Check each field (TypeError / ValueError naming it): ``name``, ``checkpoint``, ``sha256`` and ``key``
        strings, ``sha256`` a SHA-256 hex digest (64 lowercase hex digits); ``action_map`` (phi_A, a bijection of the actions) and ``obs_permutation`` (None or) a
        permutation of 0..n-1, stored as tuples of ints; ``distance`` a number >= 0, NaN when there is no
        ``obs_permutation`` (nothing it measures); ``nearest`` None or a :class:`Transformation`, ``known``
        None or a :class:`SymmetryMatch`."""
        set_, what = object.__setattr__, "LearnedTransformation."
        for key in ("name", "checkpoint", "sha256", "key"):
            text(getattr(self, key), what + key)
        if not _SHA256.fullmatch(self.sha256):  # what verify compares with file_sha256's hexdigest
            raise ValueError(f"{what}sha256 must be 64 lowercase hex digits, not {self.sha256!r}")
        set_(self, "action_map", permutation(self.action_map, what + "action_map (phi_A)"))
        if self.obs_permutation is not None:
            set_(self, "obs_permutation", permutation(self.obs_permutation, what + "obs_permutation"))
        set_(self, "distance", real(self.distance, what + "distance", minimum=0.0))
        if self.obs_permutation is None and not math.isnan(self.distance):
            raise ValueError(f"{what}distance must be NaN without an obs_permutation, not {self.distance!r}")
        for key, kind in (("nearest", Transformation), ("known", SymmetryMatch)):
            if not isinstance(getattr(self, key), kind | None):
                raise TypeError(f"{what}{key} must be None or a {kind.__name__}, not {getattr(self, key)!r}")
        if self.nearest is not None:
            self._check_nearest(self.nearest.inverse())

    def _check_nearest(self, t: Transformation) -> None:
        """``nearest`` = T^-1 agrees with the other fields (the class docstring): T the identity on states, phi_A
        on each agent's actions (``action_map``'s first entries), ``obs_permutation`` on its observations."""
        what = "LearnedTransformation.nearest"
        if self.obs_permutation is None:
            raise ValueError(f"{what} is the rounding of an obs_permutation, which is None")
        if t.states != tuple(range(len(t.states))):
            raise ValueError(f"{what}: its inverse must be the identity on states, not {t.states}")
        for i, (acts, obs) in enumerate(zip(t.actions, t.observations, strict=True)):
            if acts != self.action_map[: len(acts)] or obs != self.obs_permutation:
                raise ValueError(
                    f"{what}: agent {i}'s inverse maps actions {acts} and observations {obs}, not phi_A "
                    f"{self.action_map[: len(acts)]} and obs_permutation {self.obs_permutation}"
                )

    def to_json(self) -> dict[str, Any]:
        """The JSON form, tagged ``"kind": "learned"`` (an exact :class:`Transformation` has no ``kind``)."""
        return {
            "kind": "learned",
            "name": self.name,
            "checkpoint": self.checkpoint,
            "sha256": self.sha256,
            "key": self.key,
            "action_map": list(self.action_map),
            "obs_permutation": None if self.obs_permutation is None else list(self.obs_permutation),
            "distance": None if math.isnan(self.distance) else self.distance,
            "nearest": None if self.nearest is None else self.nearest.to_json(),
            "known": None if self.known is None else self.known.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LearnedTransformation:
        """The inverse of :meth:`to_json`; fields recorded later (``known``, ...) may be absent; a missing key
        or mistyped value is a ``RecordError`` (a ValueError) naming the keys it expects."""
        return read_record("LearnedTransformation", data, cls._build, _LEARNED_KEYS, _LEARNED_LATER)

    @classmethod
    def _build(cls, data: Mapping[str, Any]) -> LearnedTransformation:
        perm, dist, near = data.get("obs_permutation"), data.get("distance"), data.get("nearest")
        known = data.get("known")
        return cls(  # __post_init__ checks the values (int("3") read a string, int(1.5) truncated)
            name=data["name"],
            checkpoint=data["checkpoint"],
            sha256=data["sha256"],
            key=data["key"],
            action_map=data["action_map"],
            obs_permutation=perm,
            distance=null_as_nan(dist),
            nearest=None if near is None else Transformation.from_json(near),
            known=None if known is None else SymmetryMatch.from_json(known),
        )

    def verify(self, base: str | os.PathLike[str] | None = None) -> Path:
        """The checkpoint's path inside ``base`` (the discovery output's folder; the working directory when
        None) after checking its SHA-256; :class:`ArtifactError` naming the file when it is missing, altered,
        no regular file (a FIFO is not waited on), larger than ``MAX_FILE_BYTES``, or no path inside ``base``:
        absolute, with "..", or through a link leading out (a discovery.json may come from a stranger)."""
        return self.read_checkpoint(base)[0]

    def read_checkpoint(self, base: str | os.PathLike[str] | None = None) -> tuple[Path, bytes]:
        """The checkpoint's path and bytes, checked as :meth:`verify` checks them (read and hashed once, by
        ``ers_exact.util.files.read_confined``: the bytes returned are those whose SHA-256 was compared)."""
        what = f"the checkpoint of learned transformation {self.name!r}"
        return read_confined(
            self.checkpoint, what, folder=base or ".", sha256=self.sha256, error=ArtifactError
        )


AnyTransformation = Transformation | LearnedTransformation


def _transformation_from_json(data: dict[str, Any]) -> AnyTransformation:
    if isinstance(data, Mapping) and data.get("kind") == "learned":
        return LearnedTransformation.from_json(data)
    return Transformation.from_json(data)


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise TypeError(f"a list is needed, not {type(v).__name__}")
    return v


@dataclass(frozen=True)
class DiscoveryResult:
    """Learned transformations, best first, and how well they behave as a group (the paper's Table 2); what
    ``ers_exact.zsc.discovery.discover`` and ``ers_deep.discovery.discover`` both return.

    * ``game``: the game as the writing package names it: ers-exact the game's name (``three-lever``),
      ers-deep its env (``TrainConfig.game``: ``tabular:three-lever``, ``hanabi:Hanabi-Small``,
      ``overcooked-v2:grounded_coord_simple``), so the same tabular game differs by the ``tabular:`` prefix;
    * ``algorithm``: ``sp-max`` (Algorithm 1), ``sp-max-reg`` (Algorithm 2) or ``xp-max`` (Algorithm 3);
    * ``transformations``: the l = ``top`` kept phi, best first: exact :class:`Transformation` s (ers-exact)
      or :class:`LearnedTransformation` s (ers-deep; :meth:`permutations` gives the exact ones they round to).
      The two differ on the identity: ers-exact's candidates include it (it scores J-bar itself, so it is
      usually kept, and "the top 6 on three-lever are the 6 lever relabelings" counts it), while ers-deep's
      action candidates leave the identity action map out (its l are non-trivial; the identity joins them where
      they are used) and may keep two candidates that round to one permutation. Compare the two as sets of
      non-identity permutations (the exact-vs-deep benchmark compares the groups they generate);
    * ``scores``: what each kept phi is ranked by on the pool Pi' it was learned from: J-bar_phi =
      mean_{pi in Pi'} J(phi(pi)) for sp-max and sp-max-reg (Algorithm 2 chooses phi_O by its regularised
      objective, then keeps the top l by J-bar; before 2026-12-07 ers-exact ranked and reported the regularised
      value); for xp-max ers-exact's is XP(pi_i, phi(pi_j)) of the pair phi was learned on (Algorithm 3: one phi
      per pair), ers-deep's the mean XP over the ordered pairs of Pi' (its candidates train on every pair).
      ers-deep's Pi' is the half of the pool its candidates trained on;
    * ``pool_return``: mean J(pi) over Pi', for reference;
    * ``J_1``, ``J_2``, ``J_3``: E J((phi_1 o ... o phi_k)(pi)) over k = 1, 2, 3 kept phi and pi in the
      unseen (held-out) pool;
    * ``reconstruction_loss``: the paper's relative reconstruction loss, the mean over the kept phi of
      E_{pi ~ unseen pool} E_{tau ~ pi} ||tau - phi_O^2(tau)|| / ||tau|| (l2 norms), tau each agent's AOH at the
      steps it acts in pi's play (ers-exact: weighed by its exact reach; ers-deep: the acting seats' histories in
      sampled self-play), every policy weighing the same; the empty history (||tau|| = 0) is left out as 0/0, NaN
      where none is left (H = 1). On tabular games (both packages alike; ``ers_exact.zsc.reconstruction``) tau
      (a_0, o_1, ..., a_{t-1}, o_t) is the concatenation over its steps of one-hot action and one-hot observation
      and phi_O^2 maps the observations only (phi_A never enters): sqrt(c / t) for c of the t observations moved,
      0 where phi_O is an involution whatever phi_A. On Hanabi and Overcooked V2 (ers-deep) tau is the observation
      vector (HLE's encodes the history) and phi_O^2 the learned network applied twice. Until 2026-12-07 ers-deep
      measured whole-history one-hots under phi applied twice, phi_A included, counting the empty history,
      and ers-exact gave 0 at H = 1;
    * ``config``: how the run was made (package-specific keys; not compared).

    Equal results compare equal with NaN equal to NaN, and equal their JSON round trip
    (``DiscoveryResult.from_json(json.loads(r.dumps())) == r``)."""

    game: str
    algorithm: str  # "sp-max" (Alg. 1), "sp-max-reg" (Alg. 2), "xp-max" (Alg. 3), or a deep variant
    transformations: tuple[AnyTransformation, ...]  # exact permutations, or learned (ers-deep)
    scores: tuple[float, ...]  # the objective each transformation reached
    pool_return: float  # mean J over the pool, for reference
    J_1: float
    J_2: float
    J_3: float
    reconstruction_loss: float
    config: dict[str, Any] = field(default_factory=dict, compare=False)

    __eq__ = nan_equal
    __hash__ = nan_hash

    def __post_init__(self) -> None:
        """Check each field against the contract above (TypeError / ValueError naming it): ``game`` and
        ``algorithm`` strings; ``transformations`` a tuple (or list) of :class:`Transformation` /
        :class:`LearnedTransformation`; ``scores`` one number per transformation; the numbers real, finite
        or NaN (undefined), ``reconstruction_loss`` >= 0 or NaN; ``config`` a dict. Sequences are stored as
        tuples, numbers as floats."""
        set_ = object.__setattr__
        for name in ("game", "algorithm"):
            text(getattr(self, name), f"DiscoveryResult.{name}")
        phis = sequence(self.transformations, "DiscoveryResult.transformations")
        for k, t in enumerate(phis):
            if not isinstance(t, Transformation | LearnedTransformation):
                raise TypeError(
                    f"DiscoveryResult.transformations[{k}] must be a Transformation or LearnedTransformation, "
                    f"not {type(t).__name__} {t!r}"
                )
        scores = sequence(self.scores, "DiscoveryResult.scores")
        if len(scores) != len(phis):
            raise ValueError(
                f"DiscoveryResult.scores must hold one score per transformation ({len(phis)}), not {len(scores)}"
            )
        set_(self, "transformations", phis)
        set_(self, "scores", tuple(real(v, f"DiscoveryResult.scores[{k}]") for k, v in enumerate(scores)))
        for name in ("pool_return", "J_1", "J_2", "J_3", "reconstruction_loss"):
            low = 0.0 if name == "reconstruction_loss" else None
            set_(self, name, real(getattr(self, name), f"DiscoveryResult.{name}", minimum=low))
        if not isinstance(self.config, dict):
            raise TypeError(f"DiscoveryResult.config must be a dict, not {type(self.config).__name__}")

    def permutations(self) -> tuple[Transformation, ...]:
        """The transformations as exact permutations: learned ones replaced by the transformation they round
        to; raises :class:`ArtifactError` for a learned one that rounds to none."""
        out = []
        for t in self.transformations:
            if isinstance(t, LearnedTransformation):
                if t.nearest is None:
                    raise ArtifactError(
                        f"learned transformation {t.name!r} rounds to no exact transformation"
                    )
                t = t.nearest
            out.append(t)
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``discovery.json``); numbers as floats, NaN included: :meth:`dumps` writes strict
        JSON."""
        return {
            "game": self.game,
            "algorithm": self.algorithm,
            "transformations": [t.to_json() for t in self.transformations],
            "scores": list(self.scores),
            "pool_return": self.pool_return,
            "J_1": self.J_1,
            "J_2": self.J_2,
            "J_3": self.J_3,
            "reconstruction_loss": self.reconstruction_loss,
            "config": self.config,
        }

    def dumps(self) -> str:
        """Strict JSON (an undefined number, NaN, is written as null and read back as NaN), as
        :meth:`ZSCReport.dumps`."""
        return strict_dumps(self.to_json(), indent=2)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DiscoveryResult:
        """The inverse of :meth:`to_json` (either package's ``discovery.json``; null numbers read as NaN); a
        missing key or mistyped value is a ``RecordError`` (a ValueError) naming the keys it expects."""
        return read_record("DiscoveryResult", data, cls._build, _RESULT_KEYS, ("config",))

    @classmethod
    def _build(cls, data: Mapping[str, Any]) -> DiscoveryResult:
        return cls(
            game=data["game"],
            algorithm=data["algorithm"],
            transformations=tuple(_transformation_from_json(t) for t in _list(data["transformations"])),
            scores=tuple(null_as_nan(v) for v in _list(data["scores"])),
            pool_return=null_as_nan(data["pool_return"]),
            J_1=null_as_nan(data["J_1"]),
            J_2=null_as_nan(data["J_2"]),
            J_3=null_as_nan(data["J_3"]),
            reconstruction_loss=null_as_nan(data["reconstruction_loss"]),
            config=dict(data.get("config", {})),
        )
