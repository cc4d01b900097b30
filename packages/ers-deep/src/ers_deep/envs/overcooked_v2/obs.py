"""Overcooked V2 observations by table look-up: JaxMARL's DEFAULT observation, cropped to each agent's view.

Every grid channel of a window cell is a function of one small integer, the cell's *code*, so an observation is one
row gather from a table fixed per layout, plus the agents drawn on top:

* the code of a map cell is ``offset[class] + local``: the class is its static object (wall, goal, pot, recipe
  indicator, button, plate pile, ingredient pile i, or other) and ``local`` is its dynamic state: the item
  bitfield on a counter; item + NI * timer on a pot; recipe // 4 on a recipe indicator; 1 + recipe // 4 on a lit
  button (0 when dark); the delivery flag on the goal (``indicate_successful_delivery``); window cells outside the
  map have one code of their own. Items lie only on counters and pots (the only cells a drop targets);
* table row = [zeros for the agent channels, static one-hot (6+n), item layers (2+n), recipe layers (2+n), pot
  timer, delivery flag][:C], stored as uint8 packed into int64 words so that one ``index_select`` moves 8 channels
  per element;
* agent channels (``1 + 4 + (2+n)``: presence, direction one-hot, inventory layers) come from a (direction,
  inventory) table and are added at each agent's cell of every observer's window (own block or others' block).

Channel order (JaxMARL): own agent F, other agents F, static 6+n, items 2+n, recipe 2+n, pot timer,
[delivery]; ``channel_labels`` names every channel (the symmetries derive their channel maps from it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ers_deep.envs.overcooked_v2 import layouts as L
from ers_deep.envs.overcooked_v2.dynamics import POT_COOK_TIME
from ers_deep.envs.overcooked_v2.layouts import OvercookedLayout, item_layers

POT_TIMER_VALUES = POT_COOK_TIME + 1  # the pot timer runs from the cook time down to 0


def static_objects(n: int) -> list[int]:
    """The static objects with a one-hot channel, in channel order (JaxMARL), for n ingredients."""
    return [L.WALL, L.GOAL, L.POT, L.RECIPE_INDICATOR, L.BUTTON_INDICATOR, L.PLATE_PILE] + [
        L.PILE_BASE + i for i in range(n)
    ]


def channel_labels(n: int, indicate_delivery: bool) -> list[tuple[Any, ...]]:
    """One label per observation channel, in channel order (``item_layers`` order for items: plate, cooked,
    ingredient i): ``(block, "present")``, ``(block, "dir", d)`` (d indexes ``DIR_VEC``), ``(block, "holds",
    *item)`` for block "own" and "other"; ``("static", object)``; ``("items", *item)``; ``("recipe", *item)``;
    ``("pot_timer",)``; ``("delivered",)`` with ``indicate_delivery``."""
    item = [("plate",), ("cooked",)] + [("ingredient", i) for i in range(n)]
    agent = [("present",)] + [("dir", d) for d in range(len(L.DIR_VEC))] + [("holds", *x) for x in item]
    out = [(block, *a) for block in ("own", "other") for a in agent]
    out += [("static", obj) for obj in static_objects(n)]
    out += [("items", *x) for x in item] + [("recipe", *x) for x in item] + [("pot_timer",)]
    return [*out, ("delivered",)] if indicate_delivery else out


class ObservationEncoder:
    """Precomputed look-up tables of one layout and view (``agent_view_size`` p, or None for the whole grid).

    ``encode`` maps a batched state to ``[B, A, V, V, C]`` observations; ``C`` is ``channels`` (38 for the ERS
    paper's truncated variant, 40 for JaxMARL's, +1 with the delivery indicator)."""

    def __init__(
        self,
        layout: OvercookedLayout,
        view: int | None,
        channels: int,
        indicate_delivery: bool,
        device: torch.device,
    ) -> None:
        H, W, n = layout.height, layout.width, layout.num_ingredients
        self.A, self.W, self.HW, self.channels, self.device = layout.num_agents, W, H * W, channels, device
        self.view, self.view_h, self.view_w = view, *((H, W) if view is None else (2 * view + 1,) * 2)
        self.VV, self.F, self.n_items = self.view_h * self.view_w, 1 + 4 + 2 + n, 1 << (2 + 2 * n)
        # window cells of every agent cell: map index, or HW (outside the map)
        wy, wx = np.meshgrid(np.arange(self.view_h), np.arange(self.view_w), indexing="ij")
        cy, cx = np.divmod(np.arange(H * W), W)
        p = view or 0
        ox, oy = (cx - p, cy - p) if view is not None else (np.zeros_like(cx), np.zeros_like(cy))
        gx, gy = ox[:, None] + wx.reshape(-1), oy[:, None] + wy.reshape(-1)  # [HW, VV]
        inside = (gx >= 0) & (gx < W) & (gy >= 0) & (gy < H)
        self.window = torch.as_tensor(np.where(inside, gy * W + gx, H * W), device=device)  # [HW, VV]
        self.origin = torch.as_tensor(np.stack([ox, oy], -1), device=device)  # [HW, 2] window origin
        self._build_codes(layout.static.reshape(-1), n, indicate_delivery)
        d, inv = np.divmod(np.arange(4 * self.n_items), self.n_items)
        feat = np.concatenate([np.ones((len(d), 1), int), np.eye(4, dtype=int)[d], item_layers(inv, n)], -1)
        self.agent_lut = torch.as_tensor(feat.astype(np.uint8), device=device)  # [4*NI, F]
        block = (~np.eye(self.A, dtype=bool)).astype(
            int
        )  # 0 own block, 1 others' block, per (observer, agent)
        self._cols = torch.as_tensor(
            block[..., None] * self.F + np.arange(self.F), device=device
        )  # [A, A, F] channels
        self._rows0 = torch.zeros(0, self.A, 1, dtype=torch.long, device=device)

    def _first_row(self, B: int) -> Tensor:
        """[B, A, 1] row of window cell 0 of observer a in game b: (b*A + a) * VV."""
        if self._rows0.shape[0] < B:
            self._rows0 = (torch.arange(B * self.A, device=self.device) * self.VV).view(B, self.A, 1)
        return self._rows0[:B]

    def _build_codes(self, static: np.ndarray, n: int, indicate_delivery: bool) -> None:
        """The code table: one row per (class, local state), and every map cell's class offset."""
        NI, RV, F = self.n_items, 1 << (2 * n), self.F
        objects = static_objects(n)
        rows: list[np.ndarray] = []
        offsets: dict[int | None, int] = {}

        def add(
            obj: int | None, items: np.ndarray, recipe: np.ndarray, timer: np.ndarray, flag: np.ndarray
        ) -> None:
            offsets[obj] = sum(len(r) for r in rows)
            onehot = np.zeros((len(items), len(objects)), int)
            if obj in objects:
                onehot[:, objects.index(obj)] = 1
            rows.append(
                np.concatenate(
                    [
                        np.zeros((len(items), 2 * F), int),
                        onehot,
                        item_layers(items, n),
                        item_layers(recipe, n),
                        timer[:, None],
                        flag[:, None],
                    ],
                    -1,
                )
            )

        def z(m: int) -> np.ndarray:
            return np.zeros(m, int)

        items, timer = np.divmod(np.arange(NI * POT_TIMER_VALUES), NI)[::-1]
        add(L.POT, items, z(len(items)), timer, z(len(items)))
        add(L.WALL, np.arange(NI), z(NI), z(NI), z(NI))
        add(L.RECIPE_INDICATOR, z(RV), np.arange(RV) << 2, z(RV), z(RV))
        add(L.BUTTON_INDICATOR, z(RV + 1), np.maximum(np.arange(RV + 1) - 1, 0) << 2, z(RV + 1), z(RV + 1))
        add(L.GOAL, z(2), z(2), z(2), np.array([0, 1]))
        for obj in objects[5:] + [None]:  # plate pile, ingredient piles, then every other cell (and outside)
            add(obj, z(1), z(1), z(1), z(1))
        table = np.concatenate(rows)
        table = table if indicate_delivery else table[:, :-1]  # the flag column is optional
        if table.shape[1] != len(channel_labels(n, indicate_delivery)):  # pragma: no cover - a guard
            raise AssertionError("the code table and channel_labels disagree on the channels")
        table = table[:, : self.channels]
        # rows move as whole words: 8 (or 4, 2) channels per element of one index_select
        word = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[math.gcd(table.shape[1], 8)]
        self.table = torch.as_tensor(table.astype(np.uint8), device=self.device).view(word)
        outside = offsets[None]
        self.offset = torch.as_tensor(
            [offsets.get(int(c), outside) for c in static] + [outside], device=self.device
        )  # [HW+1]
        self.is_pot = torch.as_tensor(static == L.POT, device=self.device)
        self.is_wall = torch.as_tensor(static == L.WALL, device=self.device)
        self.is_recipe = torch.as_tensor(static == L.RECIPE_INDICATOR, device=self.device)
        self.is_button = torch.as_tensor(static == L.BUTTON_INDICATOR, device=self.device)
        self.is_goal = torch.as_tensor(static == L.GOAL, device=self.device) if indicate_delivery else None

    def cell_codes(self, items: Tensor, extra: Tensor, recipe: Tensor, delivered: Tensor) -> Tensor:
        """[B, HW+1] code of every map cell (and of 'outside', the last column)."""
        rec = (recipe >> 2)[:, None]
        local = torch.where(self.is_pot, items + self.n_items * extra, torch.where(self.is_wall, items, 0))
        local = (
            local
            + torch.where(self.is_recipe, rec, 0)
            + torch.where(self.is_button & (extra > 0), rec + 1, 0)
        )
        if self.is_goal is not None:
            local = local + (self.is_goal & delivered[:, None])
        return torch.cat([local, local.new_zeros(local.shape[0], 1)], 1) + self.offset

    def encode(
        self,
        pos: Tensor,
        direction: Tensor,
        inv: Tensor,
        items: Tensor,
        extra: Tensor,
        recipe: Tensor,
        delivered: Tensor,
        dtype: torch.dtype,
    ) -> Tensor:
        """[B, A, V, V, C] observations of every agent (zero outside the map)."""
        B, A, VV, F = pos.shape[0], self.A, self.VV, self.F
        N = B * A * VV
        cell = pos[..., 1] * self.W + pos[..., 0]  # [B, A] map cell of every agent
        codes = self.cell_codes(items, extra, recipe, delivered).gather(1, self.window[cell].view(B, A * VV))
        # one spare row after the N window rows absorbs the writes of agents outside a window
        codes = torch.cat([codes.view(-1), self.offset[-1:]])
        out = self.table.index_select(0, codes).view(torch.uint8)  # [N+1, C]
        # agent o drawn in observer a's window: own block (0) when o == a, else the others' block (1)
        rel = pos[:, None, :, :] - self.origin[cell][:, :, None, :]  # [B, A(observer), A(agent), 2]
        vis = (
            (rel[..., 0] >= 0)
            & (rel[..., 0] < self.view_w)
            & (rel[..., 1] >= 0)
            & (rel[..., 1] < self.view_h)
        )
        row = torch.where(vis, self._first_row(B) + rel[..., 1] * self.view_w + rel[..., 0], N)  # [B, A, A]
        val = self.agent_lut[direction * self.n_items + inv][:, None, :, :].expand(B, A, A, F)
        # targets are distinct (agents never share a cell; own and others' blocks differ): a plain scatter
        out.view(-1).scatter_(0, (row[..., None] * self.channels + self._cols).view(-1), val.reshape(-1))
        out = out[:N].view(B, A, self.view_h, self.view_w, self.channels)
        return out if dtype == torch.uint8 else out.to(dtype)
