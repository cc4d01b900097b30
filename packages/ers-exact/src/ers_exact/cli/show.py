"""Text summaries of the ``ers-exact`` commands' results (what is printed without ``--json``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "print_table",
    "show_atlas",
    "show_census",
    "show_demo",
    "show_discover",
    "show_games",
    "show_op",
    "show_optimal",
    "show_optimal_set",
    "show_solve",
    "show_sweep",
    "show_symmetries",
    "show_zsc",
]


def _fmt(v: Any) -> str:
    return f"{v:.6f}" if isinstance(v, float) else ("-" if v is None else str(v))


#: rows a text summary lists of a result's points (a certified optimal set may hold tens of thousands)
TEXT_ROWS = 40


def print_table(rows: Sequence[dict[str, Any]], keys: Sequence[str], max_rows: int | None = None) -> None:
    """Rows as aligned columns (floats to 6 places, None as '-'); past ``max_rows``, the first ``max_rows`` and a
    line that says how many more ``--json`` lists."""
    shown = rows if max_rows is None else rows[:max_rows]
    widths = [max([len(k), *(len(_fmt(r.get(k))) for r in shown)]) for k in keys]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths)))
    for r in shown:
        print("  ".join(_fmt(r.get(k)).ljust(w) for k, w in zip(keys, widths)))
    if len(rows) > len(shown):
        print(f"... {len(rows) - len(shown):,} more row(s) not shown (--json lists all {len(rows):,})")


def _wrote(result: dict[str, Any], key: str = "plot") -> None:
    if key in result:
        print(f"wrote {result[key]}")


def show_games(result: dict[str, Any]) -> None:
    print_table(result["games"], ["name", "n_agents", "n_states", "n_actions", "horizon", "description"])


def _optimum(result: dict[str, Any]) -> str:
    """J* and |Pi*| where every fixed point is proven found; otherwise the best found, a lower bound on J* (the
    points not found may hold a better one: three-lever at 0.25, 1.896361 found, 1.899292 proven by optimal-set)."""
    if result["complete"]:
        return f"J* = {result['J_star']:.6f}, |Pi*| = {result['n_optimal']}"
    return (
        f"J* >= {result['J_star']:.6f} (the best found, {result['n_optimal']} point(s) at it; "
        "ers-exact optimal-set proves J* and Pi*)"
    )


def show_solve(result: dict[str, Any]) -> None:
    print(
        f"{result['game']} H={result['horizon']} alpha={result['alpha']}: "
        f"{'' if result['complete'] else '>= '}{result['n_fixed_points']} fixed point(s) (all proven: "
        f"{result['complete']}), {_optimum(result)}; {result['completeness']}"
    )
    if result["n_unconverged"]:
        print(
            f"not listed: {result['n_unconverged']} near-root(s) whose residual passed but whose Newton step did "
            "not (still converging, only linearly: a singular root, a bifurcation at this alpha; not resolved in "
            "float64)"
        )
    print_table(
        result["fixed_points"],
        ["J", "residual", "spectral_radius", "stable", "certified", "optimal", "basin"],
        TEXT_ROWS,
    )


def show_optimal_set(result: dict[str, Any]) -> None:
    lo, hi = result["J_star"]
    star = f"J* in [{lo:.9g}, {hi:.9g}]" if result["complete"] else f"J* >= {lo:.9g}"
    print(
        f"{result['game']} H={result['horizon']} alpha={result['alpha']}: {star}, |Pi*| = {result['n_optimal']} "
        f"(eps {result['eps']:g}), complete: {result['complete']}; {result['note']}"
    )
    rows = [{**p, "J_lo": p["J_enclosure"][0], "J_hi": p["J_enclosure"][1]} for p in result["points"]]
    print_table(rows, ["J", "J_lo", "J_hi", "residual", "certified", "optimal", "found_by"], TEXT_ROWS)


def show_sweep(result: dict[str, Any]) -> None:
    print_table(result["per_alpha"], ["alpha", "n_fixed_points", "n_optimal", "J_star", "complete"])
    for b in result["bifurcations"]:
        print(
            f"count changes between alpha {b['between'][0]} and {b['between'][1]}: "
            f"{b['n_before']} -> {b['n_after']}"
        )
    _wrote(result)


def show_symmetries(result: dict[str, Any]) -> None:
    print(
        f"{result['game']} alpha={result['alpha']}: |Psi| = {result['psi_order_text']}, |Pi*| found = "
        f"{result['pool_size']} (complete: {result['optimal_set_complete']})"
    )
    if result.get("optimal_set") is not None:
        proof = result["optimal_set"]
        print(f"optimal-set ({proof['seconds']} s, {proof['boxes']:,} boxes): {proof['note']}")

    def parts(g: dict[str, Any]) -> str:  # policy parts, and how many distinct maps of policies they are
        n, d = g["order_on_policies"], g.get("distinct_on_policies")
        return f"{n:,} on policies" + ("" if d is None or d == n else f", {d:,} distinct maps of them")

    print(
        f"|Phi_MDP| = {result['mdp']['order_text']} ({parts(result['mdp'])}, "
        f"{result['mdp']['n_generators']} generators); "
        f"|Phi_ER| = {result['er']['order_text']} ({parts(result['er'])}); "
        f"Phi_MDP <= Phi_ER: {result['mdp_subgroup_of_er']}; in Phi_ER not Phi_MDP (on policies): "
        f"{result['er_not_mdp_on_policies']:,}"
    )
    orbits = {k: v for k, v in result["mdp"]["orbits"].items() if v}
    shown = "; ".join(
        f"{k}: {len(v)} orbit(s) of sizes {sorted(map(len, v), reverse=True)[:8]}" for k, v in orbits.items()
    )
    print(f"Phi_MDP orbits: {shown or 'none (trivial group)'}")
    er = result["er"]
    if er.get("orbits") is not None:
        er_orbits = {k: v for k, v in er["orbits"].items() if v}
        shown = "; ".join(f"{k}: {sorted(map(len, v), reverse=True)[:8]}" for k, v in er_orbits.items())
        took = f", {er['seconds']} s" if "seconds" in er else ""
        pool = sorted(map(len, er["orbits_on_pool"]), reverse=True)[:8]
        print(
            f"Phi_ER ({er['method']}, {er.get('n_generators', 0)} generators{took}) orbit sizes: "
            f"{shown or 'none on labels'}; on the pool: {pool}"
        )
    if er.get("claim"):
        print(f"proven: {er['claim']}")


def show_atlas(result: dict[str, Any]) -> None:
    print_table(
        result["rows"],
        [
            "alpha",
            "pool_size",
            "er_order_on_policies",
            "mdp_order",
            "mdp_subgroup_of_er",
            "optimal_set_complete",
        ],
    )
    for r in result["rows"]:
        if r.get("er_undefined"):
            print(f"alpha {r['alpha']:g}: {r['er_undefined']}")
    _wrote(result)


def show_census(result: dict[str, Any]) -> None:
    for k, v in result["summary"].items():
        print(f"{k}: {v}")


def _pool_sizes(sizes: list[int], unseen: list[int], k: int) -> str:
    """The pools used, in words: their size (per agent where they differ) against the k asked for."""

    def size(ns: list[int]) -> str:
        return f"{ns[0]}" if len(set(ns)) == 1 else ", ".join(map(str, ns))

    capped = "; --pool-source exact keeps at most |Pi*_alpha|" if min(sizes + unseen) < k else ""
    return f"pool size {size(sizes)} (k = {k}{capped}); unseen pool size {size(unseen)}"


def show_zsc(result: dict[str, Any]) -> None:
    print(result["markdown"])
    k = result["config"]["k"]
    print(f"\nper agent: {_pool_sizes(result['pool_sizes'], result['unseen_pool_sizes'], k)}")


def show_optimal(result: dict[str, Any]) -> None:
    head = f"{result['game']} H={result['horizon']} gamma={result['discount']}"
    if result.get("optimal", True):
        print(f"{head}: J* = {result['value']:.6f}")
    else:
        print(
            f"{head}: NOT PROVEN OPTIMAL, stopped ({result['stopped']}): "
            f"{'-inf' if result['value'] is None else format(result['value'], '.6f')} <= J* <= "
            f"{result['upper_bound']:.6f}"
        )
    work = (
        f"{result['n_candidates']:,} policy trees"
        if result["method"] == "exhaustive"
        else f"{result['nodes_expanded']:,} partial policies expanded, {result['n_candidates']:,} children "
        f"evaluated, heuristic bound at the root {result['search']['root_bound']:.6f}"
    )
    print(f"{result['method']}: {work}; {result['seconds']:.3f} s")
    print(f"({result['description']}; the policy: --json or --save-policy)")


def show_op(result: dict[str, Any]) -> None:
    print(
        f"{result['game']} H={result['horizon']}: OP^Phi = {result['op_value']:.6f}, J = {result['J']:.6f} "
        f"(Phi = {result['symmetries']}, |Phi| = {result['n_symmetries']}, shared: {result['share']})"
    )
    print(
        f"per seed (seed {result['seed']}): OP "
        + ", ".join(f"{v:.6f}" for v in result["seed_op_values"])
        + "; by "
        + ", ".join(result["seed_methods"])
    )
    if result["deterministic_optimum"] is not None:
        print(
            f"best deterministic policy: OP = {result['deterministic_optimum']:.6f} "
            f"({result['deterministic_profiles']:,} profiles searched)"
        )
    print("played in other-play (agent, history, reach: policy):")
    for r in result["played"]:
        acts = ", ".join(f"{a} {p:.3f}" for a, p in r["policy"].items())
        print(f"  {r['agent']}  ({', '.join(r['history'])})  {r['reach']:.3f}: {acts}")


def show_discover(result: dict[str, Any]) -> None:
    print(
        f"{result['algorithm']}: pool J = {result['pool_return']:.4f}; J_1 = {result['J_1']:.4f}, "
        f"J_2 = {result['J_2']:.4f}, J_3 = {result['J_3']:.4f}, reconstruction loss "
        f"{result['reconstruction_loss']:.3f}"
    )
    print(_pool_sizes([result["pool_size"]], [result["unseen_pool_size"]], result["k"]))
    for t, sc in zip(result["transformations"], result["scores"]):
        print(f"  {sc:.6f}  actions {t['actions']}  observations {t['observations']}")


def show_demo(result: dict[str, Any]) -> None:
    print_table(
        result["games"],
        [
            "name",
            "horizon",
            "joint_nodes",
            "local_histories",
            "J_uniform",
            "J_star",
            "n_fixed_points",
            "n_optimal",
            "J_star_alpha",
            "fixed_points_complete",
        ],
    )
    print(f"(fixed points at alpha = {result['config']['alpha']}, {result['config']['starts']} starts)")
    if "written" in result:
        print(f"\nwrote {result['written']}")
