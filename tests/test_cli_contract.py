"""The command-line contract of both CLIs, table-driven: every invalid input ends with exit status 2 and ONE
line ``PROG CMD: error: ...`` on stderr that names the offending value, never a traceback, never a hang,
never a silent nonsense result."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Files = Callable[[str, "str | bytes"], str]


@pytest.fixture
def make_file(tmp_path: Path) -> Files:
    def make(name: str, content: str | bytes) -> str:
        p = tmp_path / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        return str(p)

    return make


def _huge_dpomdp() -> str:
    return (
        "agents: 2\ndiscount: 1\nvalues: reward\nstates: 200000\nstart:\nuniform\nactions:\n3\n3\n"
        "observations:\n2\n2\nT: * : * : * : 0.000005\nO: * : * : * : * : 0.25\nR: * : * : * : * : 0\n"
    )


def _small_dpomdp(body: str) -> str:
    return (
        "agents: 2\ndiscount: 1\nvalues: reward\nstates: 2\nstart:\nuniform\nactions:\n2\n2\n"
        "observations:\n2\n2\n" + body
    )


SYNTAX_ERROR = _small_dpomdp("T: * : * : * : 0.5\nO: * : * : * : 0.25\nR: * : * : oops\n")
NOT_STOCHASTIC = _small_dpomdp("T: * : * : * : 0.3\nO: * : * : * : 0.25\n")
NEGATIVE_POLICY = json.dumps({"policy": [[[1.5, -0.5]] * 5] * 2})

# (id, argv after the program name, files to create {placeholder: content}, substring the message must name)
EXACT_CASES = [
    ("alpha-zero", ["solve", "dectiger", "--alpha", "0"], {}, "--alpha 0"),
    ("alpha-nan", ["solve", "dectiger", "--alpha", "nan"], {}, "--alpha nan"),
    ("alpha-negative", ["solve", "dectiger", "--alpha", "-1"], {}, "--alpha -1"),
    ("alpha-inf", ["symmetries", "toy-coordination", "--alpha", "inf"], {}, "--alpha inf"),
    ("alpha-text", ["solve", "dectiger", "--alpha", "warm"], {}, "warm"),
    ("alpha-missing", ["solve", "dectiger"], {}, "--alpha"),
    ("unknown-game", ["info", "dectigr"], {}, "dectigr"),
    ("empty-game", ["info", ""], {}, "unknown game ''"),  # was ". is a folder" (Path("") is ".")
    ("unknown-command", ["slove", "dectiger"], {}, "slove"),
    ("horizon-huge", ["info", "dectiger", "--horizon", "100000"], {}, "100000"),
    ("horizon-zero", ["info", "dectiger", "--horizon", "0"], {}, "--horizon 0"),
    ("horizon-negative", ["value", "dectiger", "--horizon", "-2"], {}, "--horizon -2"),
    ("discount-negative", ["value", "dectiger", "--discount", "-0.5"], {}, "--discount -0.5"),
    ("discount-above-one", ["optimal", "dectiger", "--discount", "1.5"], {}, "--discount 1.5"),
    ("policy-empty-object", ["value", "dectiger", "--policy", "@F"], {"F": "{}"}, "F.json"),
    ("policy-number", ["value", "dectiger", "--policy", "@F"], {"F": "42"}, "F.json"),
    ("policy-not-json", ["value", "dectiger", "--policy", "@F"], {"F": "policy = uniform"}, "F.json"),
    (
        "policy-missing-file",
        ["value", "dectiger", "--policy", "no-such-policy.json"],
        {},
        "no-such-policy.json",
    ),
    (
        "policy-wrong-agents",
        ["value", "dectiger", "--policy", "@F"],
        {"F": '{"policy": [[[1, 0, 0]]]}'},
        "agents",
    ),
    (
        "policy-wrong-shape",
        ["value", "toy-coordination", "--policy", "@F"],
        {"F": '{"policy": [[[0.5, 0.5]], [[0.5, 0.5]]]}'},
        "F.json",
    ),
    ("policy-not-simplex", ["value", "toy-coordination", "--policy", "@F"], {"F": "SIMPLEX"}, "F.json"),
    ("starts-negative", ["solve", "toy-coordination", "--alpha", "0.3", "--starts", "-1"], {}, "--starts -1"),
    ("seed-negative", ["solve", "toy-coordination", "--alpha", "0.3", "--seed", "-1"], {}, "--seed -1"),
    ("max-policies-zero", ["optimal", "dectiger", "--max-policies", "0"], {}, "--max-policies 0"),
    ("max-nodes-zero", ["symmetries", "dectiger", "--alpha", "1", "--max-nodes", "0"], {}, "--max-nodes 0"),
    ("alphas-reversed", ["sweep", "toy-coordination", "--alphas", "1:0.1:0.1"], {}, "1:0.1:0.1"),
    ("alphas-text", ["atlas", "toy-coordination", "--alphas", "low:high"], {}, "low:high"),
    ("alphas-zero-step", ["sweep", "toy-coordination", "--alphas", "0.1:1:0"], {}, "0.1:1:0"),
    ("agents-zero", ["zsc", "handshake", "--agents", "0"], {}, "--agents 0"),
    ("k-zero", ["zsc", "three-lever", "--k", "0"], {}, "--k 0"),
    ("episodes-negative", ["discover", "three-lever", "--episodes", "-5"], {}, "--episodes -5"),
    ("top-zero", ["discover", "three-lever", "--top", "0"], {}, "--top 0"),
    ("census-games-zero", ["census", "--games", "0"], {}, "--games 0"),
    ("pool-choice", ["zsc", "three-lever", "--pool-source", "deep"], {}, "deep"),
    ("op-symmetries-choice", ["op", "three-lever", "--symmetries", "er"], {}, "'er'"),
    ("op-seeds-zero", ["op", "three-lever", "--seeds", "0"], {}, "--seeds 0"),
    ("binary-game-file", ["info", "@F"], {"F": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"}, "F.dpomdp"),
    ("latin1-game-file", ["info", "@F"], {"F": "agents: 2\n# caf\xe9\n".encode("latin-1")}, "F.dpomdp"),
    ("dpomdp-200000-states", ["info", "@F"], {"F": "HUGE"}, "200000"),
    ("directory-as-game", ["info", "@DIR"], {}, "DIR"),
    ("demo-out-is-a-file", ["demo", "--out", "@F"], {"F": "not a folder"}, "F.txt"),
    (
        "export-into-missing-folder",
        ["export-gambit", "toy-coordination", "no/such/folder/x.efg"],
        {},
        "no/such",
    ),
    # found beyond the issue's list
    (
        "alphas-thousands",
        ["sweep", "toy-coordination", "--alphas", "0.0001:10:0.0001"],
        {},
        "0.0001:10:0.0001",
    ),
    ("alphas-empty", ["sweep", "toy-coordination", "--alphas", ""], {}, "--alphas ''"),
    # contradictory flags: an option the chosen method or source never reads (was silently ignored)
    (
        "optimal-exhaustive-max-seconds",
        ["optimal", "dectiger", "--method", "exhaustive", "--max-seconds", "5"],
        {},
        "--max-seconds 5",
    ),
    (
        "optimal-gmaa-memory-budget",
        ["optimal", "dectiger", "--method", "gmaa", "--memory-budget", "2"],
        {},
        "--memory-budget 2",
    ),
    (
        "optimal-exhaustive-heuristic",
        ["optimal", "dectiger", "--method", "exhaustive", "--heuristic", "Q_MDP"],
        {},
        "--heuristic Q_MDP",
    ),
    (
        "optimal-ice-max-policies",
        ["optimal", "dectiger", "--method", "ice", "--max-policies", "5"],
        {},
        "--max-policies 5",
    ),
    (
        "prove-workers-without-proof",
        ["symmetries", "two-lever", "--alpha", "1", "--prove-workers", "2"],
        {},
        "--prove-workers 2",
    ),
    (
        "atlas-prove-workers-without-proof",
        ["atlas", "two-lever", "--alphas", "1", "--prove-workers", "2"],
        {},
        "--prove-optimal-set",
    ),
    (
        "exact-pool-with-episodes",
        ["zsc", "toy-coordination", "--pool-source", "exact", "--episodes", "50"],
        {},
        "--episodes 50",
    ),
    (
        "discover-exact-pool-with-episodes",
        ["discover", "three-lever", "--pool-source", "exact", "--episodes", "5"],
        {},
        "--pool-source exact",
    ),
    ("alphas-nan", ["atlas", "toy-coordination", "--alphas", "0.3,nan"], {}, "0.3,nan"),
    (
        "plot-into-missing-folder",
        ["sweep", "toy-coordination", "--alphas", "0.3", "--plot", "no/such/p.png"],
        {},
        "no/such",
    ),
    (
        "plot-unknown-format",
        ["atlas", "toy-coordination", "--alphas", "0.3", "--plot", "atlas.txt"],
        {},
        "atlas.txt",
    ),
    (
        "save-policy-into-missing-folder",
        ["optimal", "toy-coordination", "--save-policy", "no/such/pi.json"],
        {},
        "no/such",
    ),
    ("export-wrong-suffix", ["export-gambit", "toy-coordination", "toy.txt"], {}, "toy.txt"),
    ("export-to-a-folder", ["export-gambit", "toy-coordination", "@DIR"], {}, "DIR"),
    ("policy-is-a-folder", ["value", "toy-coordination", "--policy", "@DIR"], {}, "DIR"),
    (
        "policy-ragged",
        ["value", "toy-coordination", "--policy", "@F"],
        {"F": '{"policy": [[[1, 0], [1]], [[1]]]}'},
        "F.json",
    ),
    ("policy-negative", ["value", "toy-coordination", "--policy", "@F"], {"F": NEGATIVE_POLICY}, "F.json"),
    ("dpomdp-syntax-error", ["info", "@F"], {"F": SYNTAX_ERROR}, "F.dpomdp"),
    ("dpomdp-not-stochastic", ["info", "@F"], {"F": NOT_STOCHASTIC}, "F.dpomdp"),
    ("dpomdp-missing-file", ["info", "GridSmal.dpomdp"], {}, "GridSmal.dpomdp"),
    ("horizon-not-integer", ["info", "dectiger", "--horizon", "1.5"], {}, "1.5"),
    ("discount-nan", ["solve", "dectiger", "--alpha", "1", "--discount", "nan"], {}, "--discount nan"),
    (
        "policy-budget",
        ["optimal", "dectiger", "--horizon", "3", "--method", "exhaustive", "--max-policies", "1000"],
        {},
        "1,000 (raise --max-policies",  # the flag that raises it, not the library's max_policies
    ),
    (
        "children-budget",
        ["optimal", "dectiger", "--horizon", "3", "--method", "gmaa", "--max-children", "50"],
        {},
        "--max-children",
    ),
    ("method-choice", ["optimal", "dectiger", "--method", "dfs"], {}, "dfs"),
    ("history-budget", ["solve", "dectiger", "--alpha", "1", "--max-nodes", "10"], {}, "--max-nodes = 10"),
    (  # the whole process (what is resident, the index structures, one Newton step) over --memory-budget
        "solve-memory-budget",
        ["solve", "dectiger", "--horizon", "3", "--alpha", "1", "--memory-budget", "0.01"],
        {},
        "--memory-budget",
    ),
    ("agents-too-many", ["zsc", "handshake", "--agents", "501"], {}, "--agents 501"),
    ("top-zero", ["zsc", "three-lever", "--top", "0"], {}, "--top 0"),
    ("m-zero", ["zsc", "three-lever", "--m", "0"], {}, "--m 0"),
    ("episodes-zero", ["zsc", "three-lever", "--episodes", "0"], {}, "--episodes 0"),
    ("xp-max-one-policy", ["discover", "three-lever", "--algorithm", "xp-max", "--k", "1"], {}, "--k 1"),
    (  # the solver finds one optimal fixed point at alpha 0.6: once an "internal error" (exit 1)
        "xp-max-one-optimal-point",
        ["discover", "toy-coordination", "--pool-source", "exact", "--alpha", "0.6", "--algorithm", "xp-max"],
        {},
        "the pool has 1",
    ),
    (
        "zsc-xp-max-one-optimal-point",
        [
            "zsc",
            "toy-coordination",
            "--pool-source",
            "exact",
            "--alpha",
            "0.6",
            "--k",
            "2",
            "--algorithm",
            "xp-max",
        ],
        {},
        "the pool has 1",
    ),
    ("algorithm-choice", ["zsc", "three-lever", "--algorithm", "op"], {}, "'op'"),
    ("search-choice", ["discover", "three-lever", "--search", "random"], {}, "random"),
    ("census-out-is-a-file", ["census", "--games", "1", "--out", "@F"], {"F": "x"}, "F.dpomdp"),
    ("zsc-out-is-a-file", ["zsc", "handshake", "--out", "@F"], {"F": "x"}, "F.dpomdp"),
    ("census-alpha-zero", ["census", "--alpha", "0"], {}, "--alpha 0"),
    ("demo-max-policies-zero", ["demo", "--max-policies", "0"], {}, "--max-policies 0"),
    ("max-nodes-text", ["info", "dectiger", "--max-nodes", "lots"], {}, "lots"),
    ("optimal-set-eps-zero", ["optimal-set", "handshake", "--alpha", "1", "--eps", "0"], {}, "--eps 0"),
    (
        "optimal-set-boxes-zero",
        ["optimal-set", "handshake", "--alpha", "1", "--max-boxes", "0"],
        {},
        "--max-boxes 0",
    ),
    (
        "optimal-set-memory-budget",
        ["optimal-set", "dectiger", "--alpha", "1", "--max-boxes", "100000000000"],
        {},
        "--max-boxes",
    ),
    ("optimal-set-alpha-missing", ["optimal-set", "handshake"], {}, "--alpha"),
]

DEEP_CASES = [
    ("batch-zero", ["env-bench", "hanabi", "--batch", "0"], "--batch 0"),
    ("batch-negative", ["env-bench", "overcooked-v2", "--batch", "-4"], "--batch -4"),
    ("steps-negative", ["env-bench", "hanabi", "--steps", "-3"], "--steps -3"),
    ("steps-zero", ["env-bench", "overcooked-v2", "--steps", "0"], "--steps 0"),
    ("players-seven", ["env-bench", "hanabi", "--players", "7"], "--players 7"),
    ("players-one", ["env-bench", "hanabi", "--players", "1"], "--players 1"),
    ("layout-unknown", ["env-bench", "overcooked-v2", "--layout", "nope"], "nope"),
    ("preset-unknown", ["env-bench", "hanabi", "--preset", "Hanabi-Huge"], "Hanabi-Huge"),
    ("device-bogus", ["env-bench", "hanabi", "--device", "tpu9"], "tpu9"),
    ("against-unknown", ["env-bench", "hanabi", "--against", "openspiel"], "openspiel"),
    ("threads-zero", ["env-bench", "hanabi", "--threads", "0"], "--threads 0"),
    ("profile-negative", ["env-bench", "hanabi", "--profile", "-1"], "--profile -1"),
    ("train-env-unknown", ["train-sp", "--env", "chess", "--out", "/tmp/ers-never"], "chess"),
    (  # a CUDA graph on the CPU: once an "internal error" (exit 1) that left an empty run folder
        "train-update-mode-graph-on-cpu",
        ["train-sp", "--env", "tabular:three-lever", "--update-mode", "graph", "--out", "/tmp/ers-never"],
        "'graph'",
    ),
    (
        "train-collect-mode-compile-graph-on-cpu",
        ["train-sp", "--env", "hanabi", "--collect-mode", "compile-graph", "--out", "/tmp/ers-never"],
        "'compile-graph'",
    ),
    (  # a tabular env compiles its branch-free step (tests/deep/test_cli_train.py) but captures only on CUDA
        "train-collect-mode-graph-tabular-on-cpu",
        ["train-sp", "--env", "tabular:three-lever", "--collect-mode", "graph", "--out", "/tmp/ers-never"],
        "'graph'",
    ),
    (
        "train-game-unknown",
        ["train-sp", "--env", "tabular:tree-lever", "--out", "/tmp/ers-never"],
        "tabular:tree-lever",
    ),
    ("train-seeds-bad", ["train-sp", "--env", "hanabi", "--seeds", "4-1", "--out", "/tmp/ers-never"], "4-1"),
    (
        "train-seeds-repeated",
        ["train-sp", "--env", "hanabi", "--seeds", "1,1", "--out", "/tmp/ers-never"],
        "1,1",
    ),
    (
        "train-alpha-negative",
        ["train-sp", "--env", "hanabi", "--alpha", "-1", "--out", "/tmp/ers-never"],
        "--alpha -1",
    ),
    (
        "train-alpha-nan",
        ["train-sp", "--env", "hanabi", "--alpha", "nan", "--out", "/tmp/ers-never"],
        "--alpha nan",
    ),
    ("train-no-out", ["train-sp", "--env", "hanabi"], "--out"),
    (
        "train-total-zero",
        ["train-sp", "--env", "hanabi", "--total-steps", "0", "--out", "/tmp/ers-never"],
        "--total-steps 0",
    ),
    (
        "train-exact-on-hanabi",
        ["train-sp", "--env", "hanabi", "--advantage", "exact", "--out", "/tmp/ers-never"],
        "exact",
    ),
    ("train-resume-missing", ["train-sp", "--resume", "/tmp/ers-no-such-pool"], "/tmp/ers-no-such-pool"),
    (
        "train-op-symmetries-unknown",
        ["train-op", "--env", "hanabi", "--symmetries", "er", "--out", "/tmp/ers-never"],
        "--symmetries 'er'",
    ),
    (
        "train-op-symmetries-no-folder",
        [
            "train-op",
            "--env",
            "hanabi",
            "--symmetries",
            "/tmp/ers-no-such-discovery",
            "--out",
            "/tmp/ers-never",
        ],
        "/tmp/ers-no-such-discovery",
    ),
    ("train-op-no-symmetries", ["train-op", "--env", "hanabi", "--out", "/tmp/ers-never"], "--symmetries"),
    (
        "train-op-exact-with-symmetries",
        ["train-op", "--env", "tabular:toy-coordination", "--symmetries", "mdp", "--advantage", "exact"]
        + ["--out", "/tmp/ers-never"],
        "--advantage exact",
    ),
    (
        "train-op-seeds-bad",
        ["train-op", "--env", "hanabi", "--symmetries", "mdp", "--seeds", "2-0", "--out", "/tmp/ers-never"],
        "2-0",
    ),
    ("train-op-resume-missing", ["train-op", "--resume", "/tmp/ers-no-such-pool"], "/tmp/ers-no-such-pool"),
    ("crossplay-no-pool", ["crossplay", "/tmp/ers-no-such-pool"], "/tmp/ers-no-such-pool"),
    ("crossplay-games-zero", ["crossplay", "/tmp/ers-no-such-pool", "--games", "0"], "--games 0"),
    ("env-unknown", ["env-bench", "chess"], "chess"),
    ("batch-text", ["env-bench", "hanabi", "--batch", "many"], "many"),
    (
        "table1-minibatches-above-actors",
        [
            "table1",
            "--env",
            "overcooked-v2",
            "--num-envs",
            "16",
            "--minibatches",
            "100",
            "--out",
            "/tmp/ers-n",
        ],
        "--minibatches 100: choose 1 .. 2 x --num-envs = 32",
    ),
    (
        "table1-top-above-candidates",
        ["table1", "--top", "9", "--out", "/tmp/ers-n"],
        "--top 9 is more than --candidates 8",
    ),
    (
        "table2-top-above-candidates",
        ["table2", "--candidates", "2", "--top", "3", "--out", "/tmp/ers-n"],
        "--top 3 is more than --candidates 2",
    ),
    ("action-matrix-no-source", ["action-matrix"], "--table1"),
    ("action-matrix-two-sources", ["action-matrix", "/tmp/ers-p", "--table1", "/tmp/ers-t1"], "/tmp/ers-t1"),
    ("action-matrix-no-pool", ["action-matrix", "/tmp/ers-no-such-pool"], "/tmp/ers-no-such-pool"),
    ("action-matrix-no-table1", ["action-matrix", "--table1", "/tmp/ers-no-such-t1"], "/tmp/ers-no-such-t1"),
    ("action-matrix-games-zero", ["action-matrix", "/tmp/ers-p", "--games", "0"], "--games 0"),
    (
        "action-matrix-policy-table1",
        ["action-matrix", "--table1", "/tmp/ers-t1", "--policy", "3"],
        "--policy 3",
    ),
    ("op-preservation-no-pool-flag", ["op-preservation", "--discovery", "/tmp/ers-d"], "--pool"),
    (
        "op-preservation-no-discovery",
        ["op-preservation", "--discovery", "/tmp/ers-no-such-discovery", "--pool", "/tmp/ers-no-such-pool"],
        "/tmp/ers-no-such-discovery",
    ),
    (
        "op-preservation-games-negative",
        ["op-preservation", "--discovery", "/tmp/ers-d", "--pool", "/tmp/ers-p", "--games", "-3"],
        "--games -3",
    ),
    ("xp-distribution-no-source", ["xp-distribution"], "--table1"),
    ("xp-distribution-no-out", ["xp-distribution", "--populations", "a=/tmp/ers-p"], "--out"),
    (
        "xp-distribution-two-sources",
        ["xp-distribution", "--populations", "a=/tmp/ers-p", "--table1", "/tmp/ers-t1"],
        "/tmp/ers-t1",
    ),
    (
        "xp-distribution-bad-item",
        ["xp-distribution", "--populations", "nonsense", "--out", "/tmp/ers-never"],
        "nonsense",
    ),
    (
        "xp-distribution-repeated-name",
        ["xp-distribution", "--populations", "a=/tmp/ers-p,a=/tmp/ers-q", "--out", "/tmp/ers-never"],
        "'a'",
    ),
    (
        "xp-distribution-no-pool",
        ["xp-distribution", "--populations", "a=/tmp/ers-no-such-pool", "--out", "/tmp/ers-never"],
        "/tmp/ers-no-such-pool",
    ),
    (
        "xp-distribution-no-table1",
        ["xp-distribution", "--table1", "/tmp/ers-no-such-t1"],
        "/tmp/ers-no-such-t1",
    ),
    ("xp-distribution-bins-zero", ["xp-distribution", "--table1", "/tmp/ers-t1", "--bins", "0"], "--bins 0"),
    ("discover-no-pool", ["discover", "--pool", "/tmp/ers-no-such-pool"], "/tmp/ers-no-such-pool"),
    ("discover-pool-missing", ["discover", "--top", "2"], "--pool"),
    (
        "discover-algorithm-choice",
        ["discover", "--pool", "/tmp/ers-no-such-pool", "--algorithm", "sp-min"],
        "sp-min",
    ),
]

# ers-deep discover on pool folders made by the test: @POOL (4 policies), @POOL1 (1 policy), @BROKEN (pool.json
# not JSON), @EMPTY (a folder without pool.json), @FILE (a file), @NOFILES (4 policies whose files are missing)
DISCOVER_CASES = [
    ("not-a-pool", ["--pool", "@EMPTY"], "EMPTY"),
    ("pool-is-a-file", ["--pool", "@FILE"], "FILE"),
    ("pool-json-broken", ["--pool", "@BROKEN"], "BROKEN"),
    ("top-above-candidates", ["--pool", "@POOL", "--candidates", "3", "--top", "5"], "--top 5"),
    ("candidates-zero", ["--pool", "@POOL", "--candidates", "0"], "--candidates 0"),
    ("xp-max-one-policy", ["--pool", "@POOL1", "--algorithm", "xp-max"], "POOL1"),
    ("sp-max-one-policy", ["--pool", "@POOL1"], "POOL1"),
    ("xp-max-one-held-out", ["--pool", "@POOL", "--held-out", "@POOL1", "--algorithm", "xp-max"], "POOL1"),
    ("held-out-not-a-pool", ["--pool", "@POOL", "--held-out", "@EMPTY"], "EMPTY"),
    ("earlier-without-reg", ["--pool", "@POOL", "--earlier", "@EMPTY"], "EMPTY"),
    ("alpha-negative", ["--pool", "@POOL", "--alpha", "-0.1"], "--alpha -0.1"),
    ("lambda1-above-one", ["--pool", "@POOL", "--lambda1", "1.5"], "--lambda1 1.5"),
    # lambda_1 in [0, 1) (the paper, Algorithm 2): at 1 no rollout trains phi_theta alone
    (
        "lambda1-one",
        ["--pool", "@POOL", "--algorithm", "sp-max-reg", "--lambda1", "1"],
        "--lambda1 1.0: must be in [0, 1)",
    ),
    ("defaults-paper-tabular", ["--pool", "@POOL", "--defaults", "paper"], "--defaults paper"),
    ("lr-schedule-choice", ["--pool", "@POOL", "--lr-schedule", "cosine"], "cosine"),
    ("total-steps-zero", ["--pool", "@POOL", "--total-steps", "0"], "--total-steps 0"),
    ("out-is-a-file", ["--pool", "@POOL", "--out", "@FILE"], "FILE"),
    ("policy-files-missing", ["--pool", "@NOFILES", "--total-steps", "10"], "seed-0.safetensors"),
]


def _materialise(
    argv: list[str], files: dict[str, str | bytes], make_file: Files, tmp_path: Path
) -> list[str]:
    out = []
    for a in argv:
        if a == "@DIR":
            a = str(tmp_path)
        elif a.startswith("@"):
            key = a[1:]
            content = files[key]
            if content == "HUGE":
                content = _huge_dpomdp()
            elif content == "SIMPLEX":
                content = json.dumps({"policy": [[[0.9, 0.9]] * 5, [[0.9, 0.9]] * 5]})  # toy: 5 histories
            suffix = ".txt" if argv[0] == "demo" else (".json" if argv[0] == "value" else ".dpomdp")
            a = make_file(key + suffix, content)
        out.append(a)
    return out


def _check(prog: str, command: str, code: int, err: str, value: str) -> None:
    assert code == 2, f"exit status {code}, stderr: {err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    assert "Traceback" not in err
    assert lines[0].startswith((f"{prog} {command}: error: ", f"{prog}: error: ")), lines[0]
    assert value in lines[0], f"the message does not name {value!r}: {lines[0]}"


def _run_in_process(main: Callable[[list[str]], int], argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse exits
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("argv", "files", "value"), [pytest.param(a, f, v, id=i) for i, a, f, v in EXACT_CASES]
)
def test_ers_exact_rejects_bad_input(
    argv: list[str],
    files: dict[str, str | bytes],
    value: str,
    make_file: Files,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ers_exact.cli import main

    monkeypatch.chdir(tmp_path)
    argv = _materialise(argv, files, make_file, tmp_path)
    value = str(tmp_path) if value == "DIR" else value
    code = _run_in_process(main, argv)
    captured = capsys.readouterr()
    _check("ers-exact", argv[0], code, captured.err, value)
    assert captured.out == ""


@pytest.mark.parametrize(("argv", "value"), [pytest.param(a, v, id=i) for i, a, v in DEEP_CASES])
def test_ers_deep_rejects_bad_input(argv: list[str], value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from ers_deep.cli import main

    code = _run_in_process(main, argv)
    captured = capsys.readouterr()
    _check("ers-deep", argv[0], code, captured.err, value)
    assert captured.out == ""


def test_a_refused_training_config_leaves_no_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ers_deep.cli import main

    out = tmp_path / "pool"
    argv = ["train-sp", "--env", "tabular:three-lever", "--update-mode", "graph", "--out", str(out)]
    code = _run_in_process(main, argv)
    _check("ers-deep", "train-sp", code, capsys.readouterr().err, "graph")
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))


def _fake_pool(folder: Path, policies: int) -> str:
    folder.mkdir()
    entries = [{"seed": s, "file": f"policies/seed-{s}.safetensors"} for s in range(policies)]
    (folder / "pool.json").write_text(json.dumps({"env": "tabular:toy-coordination", "policies": entries}))
    return str(folder)


@pytest.mark.parametrize(("argv", "value"), [pytest.param(a, v, id=i) for i, a, v in DISCOVER_CASES])
def test_ers_deep_discover_rejects_bad_input(
    argv: list[str], value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before any training: the pool folder's pool.json is read to count its policies."""
    from ers_deep.cli import main

    (tmp_path / "EMPTY").mkdir()
    (tmp_path / "FILE").write_text("not a folder")
    (tmp_path / "BROKEN").mkdir()
    (tmp_path / "BROKEN" / "pool.json").write_text("{ not json")
    made = {
        "POOL": _fake_pool(tmp_path / "POOL", 4),
        "POOL1": _fake_pool(tmp_path / "POOL1", 1),
        "NOFILES": _fake_pool(tmp_path / "NOFILES", 4),
        "EMPTY": str(tmp_path / "EMPTY"),
        "FILE": str(tmp_path / "FILE"),
        "BROKEN": str(tmp_path / "BROKEN"),
    }
    argv = ["discover", *(made[a[1:]] if a.startswith("@") else a for a in argv)]
    code = _run_in_process(main, argv)
    captured = capsys.readouterr()
    _check("ers-deep", "discover", code, captured.err, made.get(value, value))
    assert captured.out == ""


def test_cuda_device_without_cuda_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from ers_deep.cli import main

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: --device cuda is valid here")
    code = _run_in_process(main, ["env-bench", "hanabi", "--device", "cuda", "--batch", "8", "--steps", "2"])
    _check("ers-deep", "env-bench", code, capsys.readouterr().err, "cuda")


@pytest.mark.parametrize("prog", ["ers-exact", "ers-deep"])
def test_console_scripts_give_one_line_and_no_traceback(prog: str) -> None:
    """The installed console scripts (real processes) follow the contract too, and refuse at once."""
    argv = (
        ["info", "dectiger", "--horizon", "100000"]
        if prog == "ers-exact"
        else ["env-bench", "hanabi", "--batch", "0"]
    )
    exe = Path(sys.executable).with_name(prog)
    proc = subprocess.run([str(exe), *argv], capture_output=True, text=True, timeout=60, check=False)
    _check(prog, argv[0], proc.returncode, proc.stderr, argv[-1])


def test_help_lists_every_option_with_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    from ers_exact.cli import main

    with pytest.raises(SystemExit):
        main(["solve", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps at the terminal's width ($COLUMNS)
    for flag in ("--alpha", "--horizon", "--discount", "--starts", "--seed", "--max-nodes"):
        assert flag in out
    assert "(default: 64)" in out


@pytest.mark.parametrize(
    ("prog", "argv"),
    [
        ("ers-exact", ["solve", "dectiger", "--alpha", "1", "--tries", "4"]),
        ("ers-exact", ["games", "extra"]),
        ("ers-deep", ["env-bench", "hanabi", "--size", "8"]),
    ],
)
def test_an_unknown_option_is_refused_by_its_command(
    prog: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``PROG CMD: error: unrecognized arguments: ...`` naming the command, whose ``--help`` lists its options
    (argparse's top-level parser said ``PROG: error: ...`` and pointed to ``PROG --help``)."""
    if prog == "ers-exact":
        from ers_exact.cli import main
    else:
        from ers_deep.cli import main
    code = _run_in_process(main, argv)
    err = capsys.readouterr().err
    _check(prog, argv[0], code, err, argv[-2] if argv[-1].isdigit() else argv[-1])
    assert err.startswith(f"{prog} {argv[0]}: error: unrecognized arguments: ")
    assert f"(see {prog} {argv[0]} --help)" in err


@pytest.mark.parametrize(
    ("prog", "argv"),
    [("ers-exact", ["--bogus", "info", "dectiger"]), ("ers-deep", ["--bogus", "env-bench", "hanabi"])],
)
def test_an_unknown_option_before_the_command_is_refused_by_the_program(
    prog: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown option given before the command is the program's to refuse (``PROG: error: ...``, pointing to
    ``PROG --help``), not blamed on the command after it (``ers-exact info: error: ... --bogus``)."""
    if prog == "ers-exact":
        from ers_exact.cli import main
    else:
        from ers_deep.cli import main
    code = _run_in_process(main, argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"{prog}: error: unrecognized arguments: --bogus") and f"(see {prog} --help)" in err


# (prog, argv, the abbreviated flag in it, the flag it abbreviates): argparse took a unique prefix as the option
# (``--star -1`` as ``--starts -1``, ``--js`` as ``--json``); abbreviations are off, so each is unknown
ABBREVIATED = [
    ("ers-exact", ["solve", "toy-coordination", "--alpha", "0.3", "--star", "-1"], "--star", "--starts"),
    ("ers-exact", ["zsc", "handshake", "--agent", "0"], "--agent", "--agents"),
    ("ers-exact", ["zsc", "three-lever", "--pool-sou", "deep"], "--pool-sou", "--pool-source"),
    ("ers-exact", ["info", "toy-coordination", "--js"], "--js", "--json"),
    ("ers-deep", ["env-bench", "hanabi", "--bat", "0"], "--bat", "--batch"),
    (
        "ers-deep",
        ["train-sp", "--env", "hanabi", "--total", "0", "--out", "/tmp/ers-never"],
        "--total",
        "--total-steps",
    ),
]


def _flags(prog: str, command: str) -> list[str]:
    """Every flag of ``PROG COMMAND``, from its options class (its deprecated names too) and the shared ones."""
    import dataclasses

    from ers_exact.util.options import flag_name

    if prog == "ers-exact":
        from ers_exact.cli import COMMANDS
    else:
        from ers_deep.cli import COMMANDS
    options = next(c.options for c in COMMANDS if c.name == command)
    flags = ["--help", "--json"]
    for f in dataclasses.fields(options):
        if not f.metadata.get("positional"):
            names = [f.name, *f.metadata.get("renamed_from", ())]
            flags += [flag_name(n) for n in names]
    return flags


@pytest.mark.parametrize(
    ("prog", "argv", "abbreviation", "full"),
    [pytest.param(p, a, b, f, id=f"{p}-{a[0]}{b}") for p, a, b, f in ABBREVIATED],
)
def test_an_abbreviated_flag_is_an_unknown_option(
    prog: str, argv: list[str], abbreviation: str, full: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An abbreviation is refused by its command as an unrecognized argument, not read as the option it
    abbreviates (which the test first checks it is: a prefix of exactly one of the command's flags)."""
    assert [f for f in _flags(prog, argv[0]) if f.startswith(abbreviation)] == [full]
    if prog == "ers-exact":
        from ers_exact.cli import main
    else:
        from ers_deep.cli import main
    code = _run_in_process(main, argv)
    captured = capsys.readouterr()
    _check(prog, argv[0], code, captured.err, abbreviation)
    assert captured.err.startswith(f"{prog} {argv[0]}: error: unrecognized arguments: {abbreviation}")
    assert captured.out == ""
