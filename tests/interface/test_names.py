"""One vocabulary across both packages (root README, "Names across the packages"): every canonical name works in
both packages, every old name still works as a deprecated alias that warns once and names the new one, and
files written by the code before the renames (``old_files/``, made by main at eb29184) still load."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ers_exact.cli import COMMANDS as EXACT_COMMANDS
from ers_exact.cli import main as exact_main
from ers_exact.interface import ZSCReport
from ers_exact.util.cli import build_parser
from ers_exact.util.deprecation import upgrade_keys
from ers_exact.util.options import Options, from_namespace
from ers_exact.zsc.config import PopulationConfig as ExactPopulationConfig

OLD = Path(__file__).parent / "old_files"


def _parse(commands: Any, argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[Options, str]:
    """The options ``argv`` parses to, and what parsing printed on stderr."""
    ns = build_parser("prog", "", "0", commands).parse_args(argv)
    options = from_namespace(next(c for c in commands if c.name == ns.command).options, ns)
    return options, capsys.readouterr().err


def _deep_commands() -> Any:
    pytest.importorskip("torch")
    from ers_deep.cli import COMMANDS

    return COMMANDS


# ----- command-line flags: the canonical one in both packages, the old one as a hidden alias -----
@pytest.mark.parametrize(
    ("old", "new"),
    [
        (["zsc", "three-lever", "--l", "3"], ["zsc", "three-lever", "--top", "3"]),
        (["zsc", "three-lever", "--pool", "exact"], ["zsc", "three-lever", "--pool-source", "exact"]),
        (
            ["discover", "three-lever", "--pool", "exact"],
            ["discover", "three-lever", "--pool-source", "exact"],
        ),
    ],
)
def test_exact_old_flags_are_warned_aliases(
    old: list[str], new: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with_old, err = _parse(EXACT_COMMANDS, old, capsys)
    with_new, quiet = _parse(EXACT_COMMANDS, new, capsys)
    assert with_old == with_new and quiet == ""
    assert err.splitlines() == [f"prog {old[0]}: DeprecationWarning: {old[2]} is deprecated; use {new[2]}"]


@pytest.mark.parametrize("command", ["table1", "table2"])
def test_deep_l_is_a_warned_alias_of_top(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    commands = _deep_commands()
    with_old, err = _parse(commands, [command, "--out", "/tmp/ers-names", "--l", "2"], capsys)
    with_new, quiet = _parse(commands, [command, "--out", "/tmp/ers-names", "--top", "2"], capsys)
    assert with_old == with_new and with_new.top == 2 and quiet == ""  # type: ignore[attr-defined]
    assert err.splitlines() == [f"prog {command}: DeprecationWarning: --l is deprecated; use --top"]


@pytest.mark.parametrize(
    ("package", "argv", "old", "new"),
    [
        ("exact", ["zsc", "three-lever", "--top", "2", "--l", "3"], "--l", "--top"),
        ("exact", ["zsc", "three-lever", "--l", "3", "--top", "2"], "--l", "--top"),
        (
            "exact",
            ["zsc", "three-lever", "--pool-source", "iql", "--pool", "exact"],
            "--pool",
            "--pool-source",
        ),
        (
            "exact",
            ["discover", "three-lever", "--pool", "exact", "--pool-source", "iql"],
            "--pool",
            "--pool-source",
        ),
        ("deep", ["table1", "--out", "/tmp/ers-names", "--top", "2", "--l", "3"], "--l", "--top"),
        ("deep", ["table2", "--out", "/tmp/ers-names", "--l", "3", "--top", "3"], "--l", "--top"),
    ],
)
def test_old_and_new_flag_together_are_a_usage_error(
    package: str, argv: list[str], old: str, new: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both spellings of one option (in either order, even with equal values) are refused, as
    ``PopulationConfig(l=3, top=3)`` is, instead of the last one silently winning: exit 2, one line."""
    commands = EXACT_COMMANDS if package == "exact" else _deep_commands()
    with pytest.raises(SystemExit) as stop:
        _parse(commands, argv, capsys)
    err = capsys.readouterr().err
    assert stop.value.code == 2
    errors = [line for line in err.splitlines() if "DeprecationWarning" not in line]
    assert len(errors) == 1 and errors[0].startswith(f"prog {argv[0]}: error: "), err
    assert old in errors[0] and new in errors[0] and f"give {new} only" in errors[0]


def test_a_repeated_canonical_flag_is_still_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    options, err = _parse(EXACT_COMMANDS, ["zsc", "three-lever", "--top", "2", "--top", "3"], capsys)
    assert options.top == 3 and err == ""  # type: ignore[attr-defined]


def test_canonical_flags_are_the_same_in_both_packages(capsys: pytest.CaptureFixture[str]) -> None:
    """``--top`` (the paper's l) in every command that keeps learned symmetries, in both CLIs; ``--pool``
    only where it names a pool (ers-deep's folders), ``--pool-source`` where it names where one comes from."""
    deep = _deep_commands()
    for commands, name in [(EXACT_COMMANDS, "zsc"), (EXACT_COMMANDS, "discover"), (deep, "discover")]:
        fields = {f.name for f in dataclasses.fields(next(c for c in commands if c.name == name).options)}
        assert "top" in fields and "l" not in fields, name
    for name in ("table1", "table2"):
        fields = {f.name for f in dataclasses.fields(next(c for c in deep if c.name == name).options)}
        assert "top" in fields and "l" not in fields
    for name in ("zsc", "discover"):
        fields = {
            f.name for f in dataclasses.fields(next(c for c in EXACT_COMMANDS if c.name == name).options)
        }
        assert "pool_source" in fields and "pool" not in fields
    help_text = build_parser("prog", "", "0", EXACT_COMMANDS)
    with pytest.raises(SystemExit):
        help_text.parse_args(["zsc", "--help"])
    shown = capsys.readouterr().out
    assert "--top" in shown and "--pool-source" in shown and "--l " not in shown and "--pool " not in shown


# ----- Python names -----
def _warns_once(old: str, new: str) -> Any:
    return pytest.warns(DeprecationWarning, match=rf"{old}.* is deprecated; use .*{new}")


def test_zsc_config_is_a_deprecated_name_of_population_config() -> None:
    import ers_exact.zsc.config as config
    import ers_exact.zsc.pipeline as pipeline

    for module in (config, pipeline):
        with _warns_once("ZSCConfig", "PopulationConfig"):
            assert module.ZSCConfig is ExactPopulationConfig
    with pytest.raises(AttributeError):
        _ = config.NoSuchConfig


def test_both_packages_have_a_population_config_with_top() -> None:
    pytest.importorskip("torch")
    from ers_deep.discovery import DeepDiscoveryConfig
    from ers_deep.zsc import PopulationConfig as DeepPopulationConfig
    from ers_exact.zsc.config import DiscoveryConfig

    assert ExactPopulationConfig(top=3).top == 3 and DeepPopulationConfig(top=3).top == 3
    assert DiscoveryConfig(top=3).top == 3 and DeepDiscoveryConfig(top=3).top == 3
    assert ExactPopulationConfig(pool_source="exact").pool_config.source == "exact"


@pytest.mark.parametrize(
    ("cls", "old", "new", "value"),
    [
        (ExactPopulationConfig, "l", "top", 3),
        (ExactPopulationConfig, "pool", "pool_source", "exact"),
        ("deep", "l", "top", 3),
    ],
)
def test_old_config_fields_are_warned_aliases(cls: Any, old: str, new: str, value: object) -> None:
    if cls == "deep":
        pytest.importorskip("torch")
        from ers_deep.zsc import PopulationConfig as cls
    with _warns_once(rf"{cls.__name__}\({old}=", f"{new}="):
        built = cls(**{old: value})
    assert built == cls(**{new: value})
    with _warns_once(rf"{cls.__name__}\.{old}", rf"{cls.__name__}\.{new}"):
        assert getattr(built, old) == value
    with pytest.raises(TypeError, match=f"give {new}= only"):
        cls(**{old: value, new: value})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the canonical names never warn
        assert getattr(cls(**{new: value}), new) == value


@pytest.mark.parametrize(
    ("cls", "old", "new", "base", "value"),
    [
        (ExactPopulationConfig, "l", "top", {"agents": 3, "top": 2}, 4),
        (ExactPopulationConfig, "pool", "pool_source", {"agents": 3, "top": 2}, "exact"),
        ("deep", "l", "top", {"agents": 3, "top": 2}, 4),
    ],
)
def test_replace_with_an_old_keyword_means_the_new_one(
    cls: Any, old: str, new: str, base: dict[str, Any], value: object
) -> None:
    """``dataclasses.replace`` passes every field, the new name too; the old keyword is the caller's change, so
    it is the new field's value (the other fields kept), warned at the caller's line."""
    if cls == "deep":
        pytest.importorskip("torch")
        from ers_deep.zsc import PopulationConfig as cls
    with pytest.warns(
        DeprecationWarning, match=rf"replace\({cls.__name__}, {old}=.* is deprecated; use {new}="
    ) as seen:
        replaced = dataclasses.replace(cls(**base), **{old: value})
    assert replaced == cls(**{**base, new: value})
    assert [w.filename for w in seen] == [__file__]


def test_population_configs_take_keywords_only() -> None:
    """A field was inserted (``select_by`` after ``m``), so a positional call would shift the later fields:
    both packages' PopulationConfig refuse positional arguments."""
    classes: list[Any] = [ExactPopulationConfig]
    if importlib.util.find_spec("torch") is not None:
        from ers_deep.zsc import PopulationConfig as DeepPopulationConfig

        classes.append(DeepPopulationConfig)
    for cls in classes:
        with pytest.raises(TypeError, match="positional"):
            cls(5, 20, 6, 5)


def test_options_classes_accept_the_old_keywords() -> None:
    from ers_exact.cli.options import DiscoverOptions, ZSCOptions

    with pytest.warns(DeprecationWarning):
        old = ZSCOptions(game="three-lever", l=2, pool="exact")  # type: ignore[call-arg]
    assert old == ZSCOptions(game="three-lever", top=2, pool_source="exact")
    with pytest.warns(DeprecationWarning):
        assert DiscoverOptions(game="three-lever", pool="exact").pool_source == "exact"  # type: ignore[call-arg]


def test_torchrl_env_holds_an_env_and_game_is_its_deprecated_name() -> None:
    pytest.importorskip("torchrl")
    from ers_deep.envs.tabular import TabularEnv
    from ers_deep.envs.tabular.torchrl import TabularTorchRLEnv

    env = TabularTorchRLEnv("three-lever", batch_size=2, seed=0)
    assert isinstance(env.env, TabularEnv) and env.env.game.name == "three-lever"  # env.env.game: the Game
    with _warns_once(r"TabularTorchRLEnv\.game", r"TabularTorchRLEnv\.env"):
        assert env.game is env.env


# ----- files written before the renames -----
def test_a_table1_folder_written_before_the_rename_is_continued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main's table1 wrote config.json with ``"l"``; the same options (now ``top``) continue that run instead
    of refusing it as another config, and ``load_deployed`` reads it without a warning."""
    pytest.importorskip("torch")
    import ers_deep.zsc.population as population
    from ers_deep.pools import PoolError
    from ers_deep.zsc import PopulationConfig, load_deployed, run_table1

    old = json.loads((OLD / "table1-config.json").read_text())
    assert old["l"] == 2 and "top" not in old
    out = tmp_path / "table1"
    out.mkdir()
    shutil.copy(OLD / "table1-config.json", out / "config.json")
    (out / ".ers-results.json").write_text(json.dumps({"command": "ers-deep table1"}))
    same = PopulationConfig(**upgrade_keys(PopulationConfig, old))
    # the old file's fields under their new names, and the fields added since at the values that run used
    since = {"select_by": "sp_return", "unseen": None, "greedy": False}
    assert same.top == 2 and same.to_json() == {
        **{k: v for k, v in old.items() if k != "l"},
        "top": 2,
        **since,
    }

    class Reached(Exception):
        pass

    def stop(*_: object, **__: object) -> None:
        raise Reached  # past the config check: the run would train its self-play pool now

    monkeypatch.setattr(population, "train_pool", stop)
    with pytest.raises(Reached):
        run_table1(same, out)
    assert json.loads((out / "config.json").read_text()) == old  # continued, not rewritten
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        with pytest.raises(PoolError, match="sp"):  # the config is read; the pools were never trained
            load_deployed(out)


def test_upgrade_keys_keeps_new_keys_and_refuses_non_objects() -> None:
    assert upgrade_keys(ExactPopulationConfig, {"l": 1, "pool": "exact", "k": 4}) == {
        "top": 1,
        "pool_source": "exact",
        "k": 4,
    }
    assert upgrade_keys(ExactPopulationConfig, {"l": 1, "top": 2}) == {"top": 2}
    with pytest.raises(TypeError, match="JSON object"):
        upgrade_keys(ExactPopulationConfig, [1, 2])  # type: ignore[arg-type]


def _close(a: object, b: object) -> bool:
    """Equal JSON values, floats within a relative 1e-9 (or 1e-15 absolute)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_close, a, b))
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return a == pytest.approx(b, rel=1e-9, abs=1e-15, nan_ok=True)
    return a == b


def test_a_zsc_report_written_before_the_rename_loads_and_matches(capsys: pytest.CaptureFixture[str]) -> None:
    """main's ``ers-exact zsc toy-coordination --agents 2 --pool exact --alpha 0.3 --k 2 --l 2 --m 1 --out``
    file: it reads back as a ZSCReport, and the same run under the canonical flags gives the same rows and
    discoveries; its config holds the same values under the new names."""
    old = json.loads((OLD / "zsc-toy-coordination-seed0.json").read_text())
    report = ZSCReport.from_json(old)
    assert report.config["l"] == 2 and report.config["pool"] == "exact"
    argv = ["zsc", "toy-coordination", "--agents", "2", "--pool-source", "exact", "--alpha", "0.3"]
    assert exact_main([*argv, "--k", "2", "--top", "2", "--m", "1", "--json"]) == 0
    new = json.loads(capsys.readouterr().out)
    # the floats to 1e-9 (on AVX2-only hosts numpy's kernels round otherwise: an OP value 0.49999999999999994
    # against the file's 0.5, a standard error 5.3081111340e-08 against 5.3081111284e-08), the rest exactly
    again = {k: v for k, v in ZSCReport.from_json(new).to_json().items() if k != "config"}  # config: below
    assert _close(again, {k: v for k, v in report.to_json().items() if k != "config"})
    assert _close(new["rows"], old["rows"]) and _close(new["discovery"], old["discovery"])
    assert new["markdown"] == old["markdown"]
    # and the deployment fields added since (this toy run's OP seeds tie, so either rule gives these rows)
    since = {"select_by": "sp_return", "op_reading": "seatings", "op_column_reading": "seatings"}
    since |= {"game": "toy-coordination", "discount": 1.0, "max_nodes": 5_000_000}  # the game as used (12-07)
    assert new["config"] == {**upgrade_keys(ExactPopulationConfig, old["config"]), **since}


# ----- deprecated module-level names warn in the user's code -----
#: every module-level deprecated name: (module, old name, new name)
DEPRECATED_MODULE_NAMES = [
    ("ers_exact.zsc", "ZSCConfig", "PopulationConfig"),
    ("ers_exact.zsc.config", "ZSCConfig", "PopulationConfig"),
    ("ers_exact.zsc.pipeline", "ZSCConfig", "PopulationConfig"),
]


@pytest.mark.parametrize(("module", "old", "new"), DEPRECATED_MODULE_NAMES)
def test_deprecated_module_names_warn_at_the_callers_line(
    module: str, old: str, new: str, tmp_path: Path
) -> None:
    """A ``__main__`` script under Python's default warning filters (which show a DeprecationWarning only
    when it is attributed to ``__main__``): ``from module import old`` and two ``module.old`` accesses each
    warn at the script's own line, naming ``module.old`` and ``module.new``."""
    script = tmp_path / "user_script.py"
    lines = [
        "import importlib",
        f"from {module} import {old}",
        f"m = importlib.import_module({module!r})",
        f"a = m.{old}",
        f"b = m.{old}",
        f"assert {old} is a is b is getattr(m, {new!r})",
    ]
    script.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONDEVMODE")}
    env["PYTHONPATH"] = os.pathsep + os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    said = f"DeprecationWarning: {module}.{old} is deprecated; use {module}.{new}"
    warned = [line for line in done.stderr.splitlines() if "DeprecationWarning" in line]
    assert warned == [f"{script}:{n}: {said}" for n in (2, 4, 5)], done.stderr
