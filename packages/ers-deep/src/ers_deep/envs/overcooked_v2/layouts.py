"""Overcooked V2 layouts (the JaxMARL ``overcooked_v2`` layout strings) and their parsed, tensor-ready form.

Grid characters: ``W`` wall/counter, ``X`` goal (delivery), ``B`` plate pile, ``P`` pot, ``R`` recipe indicator,
``L`` button recipe indicator, ``0``-``9`` ingredient pile i (``O`` = pile 0), ``A`` agent start, space = empty.
Static-object codes and item bit fields follow JaxMARL (``common.py``): an item/inventory is a bitfield with
bit0 plate, bit1 cooked and two bits (a count 0..3) per ingredient i at bit 2+2i.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np

# static objects (JaxMARL StaticObject)
EMPTY, WALL, GOAL, POT, RECIPE_INDICATOR, BUTTON_INDICATOR, PLATE_PILE, PILE_BASE = 0, 1, 4, 5, 6, 7, 9, 10
# dynamic objects (JaxMARL DynamicObject)
PLATE, COOKED = 1, 2
# directions (JaxMARL Direction): UP, DOWN, RIGHT, LEFT as (dx, dy)
DIR_VEC = ((0, -1), (0, 1), (1, 0), (-1, 0))
# actions right, down, left, up, stay, interact -> direction (-1: no move)
ACTION_TO_DIR = (2, 1, 3, 0, -1, -1)

LAYOUT_STRINGS: dict[str, str] = {
    "grounded_coord_simple": "WW2WWWWW\nW  WB  0\nR ALPA X\nW  WB  1\nWW2WWWWW",
    "grounded_coord_ring": (
        "WWW2R2WWW\nW       W\nW WWLWW W\n2 0   B 2\nRAXAP X R\n2 1   B 2\nW WWLWW W\nW       W\nWWW2R2WWW"
    ),
    "test_time_simple": "WW2WWWWW\nW  WB  0\nR AWPA X\nW  WB  1\nWW2WWWWW",
    "demo_cook_simple": "WWWWWR2W0WW\n0      W  B\nW     APA X\n1      W  B\nWWWWWR2W1WW",
    "cramped_room_v2": "WWPWW\n0A A1\nW   R\nWBWXW",
}
LAYOUT_RECIPES: dict[str, list[list[int]] | None] = {
    "grounded_coord_simple": [[0, 0, 0], [1, 1, 1]],
    "grounded_coord_ring": [[0, 0, 0], [1, 1, 1]],
    "test_time_simple": [[0, 0, 0], [1, 1, 1]],
    "demo_cook_simple": [[0, 0, 0], [1, 1, 1]],
    "cramped_room_v2": None,  # all 3-ingredient multisets, in JaxMARL's (set-iteration) order
}

_CHAR = {
    " ": EMPTY,
    "W": WALL,
    "X": GOAL,
    "B": PLATE_PILE,
    "P": POT,
    "R": RECIPE_INDICATOR,
    "L": BUTTON_INDICATOR,
}


def ingredient_bits(i: int) -> int:
    """Item encoding of one ingredient i (JaxMARL ``DynamicObject.ingredient``)."""
    return 4 << (2 * i)


def item_layers(x: np.ndarray, n: int) -> np.ndarray:
    """[..., 2+n] plate bit, cooked bit and the n ingredient counts of item bitfields ``x``."""
    shift = np.array([0, 1] + [2 * (i + 1) for i in range(n)])
    mask = np.array([1, 1] + [3] * n)
    return (x[..., None] >> shift) & mask


def all_recipes(num_ingredients: int) -> list[list[int]]:
    """Every multiset of 3 ingredients, in the order JaxMARL's ``Layout`` derives when none is given."""
    combos = itertools.combinations(list(range(num_ingredients)) * 3, 3)
    return [list(r) for r in {tuple(sorted(c)) for c in combos}]


@dataclass(frozen=True)
class OvercookedLayout:
    """A parsed layout: ``static`` [H, W] static-object codes, agent starts (x, y), recipes (ingredient lists)."""

    name: str
    static: np.ndarray  # [H, W] int64
    agent_positions: tuple[tuple[int, int], ...]
    num_ingredients: int
    recipes: tuple[tuple[int, int, int], ...]

    @property
    def height(self) -> int:
        return int(self.static.shape[0])

    @property
    def width(self) -> int:
        return int(self.static.shape[1])

    @property
    def num_agents(self) -> int:
        return len(self.agent_positions)

    @cached_property
    def recipe_codes(self) -> np.ndarray:
        """[R] item encoding of every possible recipe (sum of its ingredient bits)."""
        return np.array([sum(ingredient_bits(i) for i in r) for r in self.recipes], dtype=np.int64)

    @cached_property
    def enclosed_spaces(self) -> np.ndarray:
        """[H, W] id of the 4-connected empty region of each cell (-1 for non-empty cells). Like JaxMARL the id
        is the largest flat index y*W+x in the region."""
        H, W = self.static.shape
        ids = np.full((H, W), -1, dtype=np.int64)
        for y0 in range(H):
            for x0 in range(W):
                if self.static[y0, x0] != EMPTY or ids[y0, x0] >= 0:
                    continue
                stack, region = [(x0, y0)], []
                ids[y0, x0] = 0
                while stack:
                    x, y = stack.pop()
                    region.append((x, y))
                    for dx, dy in DIR_VEC:
                        nx, ny = x + dx, y + dy
                        if 0 <= nx < W and 0 <= ny < H and self.static[ny, nx] == EMPTY and ids[ny, nx] < 0:
                            ids[ny, nx] = 0
                            stack.append((nx, ny))
                rid = max(y * W + x for x, y in region)
                for x, y in region:
                    ids[y, x] = rid
        return ids


def parse_layout(
    text: str, recipes: list[list[int]] | None = None, name: str = "custom", swap_agents: bool = False
) -> OvercookedLayout:
    """Parse a layout string (one row per line) as JaxMARL's ``Layout.from_string`` does: agents in reading
    order, reversed with ``swap_agents`` (JaxMARL declares its ``cramped_room`` and ``counter_circuit`` so)."""
    rows = text.split("\n")
    rows = rows[1:] if rows and not rows[0] else rows
    rows = rows[:-1] if rows and not rows[-1] else rows
    static = np.zeros((len(rows), max(len(r) for r in rows)), dtype=np.int64)
    agents, n_ing, has_recipe_indicator = [], 0, False
    for y, row in enumerate(rows):
        for x, ch in enumerate(row):
            ch = "0" if ch == "O" else ch
            if ch == "A":
                agents.append((x, y))
            obj = PILE_BASE + int(ch) if ch.isdigit() else _CHAR.get(ch, EMPTY)
            static[y, x] = obj
            if obj >= PILE_BASE:
                n_ing = max(n_ing, obj - PILE_BASE + 1)
            has_recipe_indicator |= obj == RECIPE_INDICATOR
    if not agents or n_ing < 1:
        raise ValueError("a layout needs at least one agent and one ingredient pile")
    _check_edges(static, agents)
    if recipes is None:
        if not has_recipe_indicator:
            raise ValueError("a layout without a recipe indicator needs explicit recipes")
        recipes = all_recipes(n_ing)
    if any(len(r) != 3 for r in recipes):
        raise ValueError("every recipe must have 3 ingredients")
    return OvercookedLayout(
        name,
        static,
        tuple(agents[::-1] if swap_agents else agents),
        n_ing,
        tuple((int(r[0]), int(r[1]), int(r[2])) for r in recipes),
    )


def _check_edges(static: np.ndarray, agents: list[tuple[int, int]]) -> None:
    """Refuse a layout where an agent can stand in the top row or left column (a free cell connected to an agent's
    start, the cells ``random_agent_positions`` draws from too): facing off the map there, it interacts with the
    cell JaxMARL reads at index -1 (the far side of the map: JAX wraps negative indices), where ers clips to the
    map, so the two envs would differ. (Off the bottom and right edges JAX clamps the read and drops the write,
    which leaves a free cell alone as ers's clip does.)"""
    H, W = static.shape
    seen, todo = set(agents), [(x, y) for x, y in agents]
    while todo:
        x, y = todo.pop()
        if x == 0 or y == 0:
            raise ValueError(
                f"an agent can stand on the map's top row or left column (row {y}, column {x}): JaxMARL's facing "
                "cell wraps around the map there (index -1) and ers clips it, so surround the map with walls or "
                "counters"
            )
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < W and 0 <= ny < H and (nx, ny) not in seen and static[ny, nx] == EMPTY:
                seen.add((nx, ny))
                todo.append((nx, ny))


def get_layout(layout: str | OvercookedLayout) -> OvercookedLayout:
    """A layout by JaxMARL name (see ``LAYOUT_STRINGS``), or the given parsed layout."""
    if isinstance(layout, OvercookedLayout):
        return layout
    if layout not in LAYOUT_STRINGS:
        raise ValueError(f"unknown layout {layout!r}; known: {sorted(LAYOUT_STRINGS)}")
    return parse_layout(LAYOUT_STRINGS[layout], LAYOUT_RECIPES[layout], name=layout)
