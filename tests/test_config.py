from pathlib import Path

import pytest

from planner.config import bundled_models, load_model
from planner.errors import InputError


def test_every_bundled_model_loads():
    names = sorted(bundled_models())
    assert {"default", "strict-budgets"} <= set(names)
    for name in names:
        model = load_model(name)
        assert model.name == name
        w = model.objective
        # the ordering that keeps soft goals below hard rules (docs/explanation/model.md)
        assert w.guaranteed - w.opportunistic > w.pacing + w.churn
        assert w.opportunistic > w.churn


def test_default_is_a_seven_day_window_by_the_scenario_and_eight_hour_runtime_cap():
    model = load_model("default")
    assert model.lookback.kind == "window"
    assert model.contract.min_runtime_cap_hours == 8.0
    assert load_model("strict-budgets").lookback.kind == "decay"


def test_fill_slice_is_a_contract_term_of_one_hour_by_default(tmp_path: Path):
    assert load_model("default").contract.fill_slice_hours == 1.0
    assert load_model("strict-budgets").contract.fill_slice_hours == 1.0
    path = tmp_path / "slice.toml"
    path.write_text("[contract]\nfill_slice_hours = 2\n")
    assert load_model(path).contract.fill_slice_hours == 2.0


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("[objective]\nguaranted = 4.0\n", "objective.guaranted"),
        ("colour = 'red'\n", "colour"),
        ("[solver]\ntime_limit_seconds = 'soon'\n", "time_limit_seconds"),
        ("[objective]\nguaranteed = 1.0\n", "guaranteed"),
        ("[lookback]\nkind = 'forever'\n", "kind"),
        ("[contract]\nfrozen_periods = -1\n", "frozen_periods"),
        ("[contract]\nfill_slice_hours = -0.5\n", "fill_slice_hours"),
        ("[contract]\nfill_slice_hours = 'short'\n", "fill_slice_hours"),
        ("[solver]\nrandom_seed = 2147483648\n", "random_seed"),  # HiGHS's is an int32
        ("[solver]\nrandom_seed = 1.5\n", "random_seed"),
    ],
)
def test_bad_models_name_the_key(tmp_path: Path, text: str, column: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_model(path)
    assert [p.column for p in info.value.problems] == [column]
    assert info.value.problems[0].file == "bad.toml"


def test_unknown_model_name_lists_the_known_ones():
    with pytest.raises(InputError, match="known: .*default"):
        load_model("no-such-model")


def test_broken_toml_gives_the_line(tmp_path: Path):
    path = tmp_path / "broken.toml"
    path.write_text("name = 'x'\n[objective\n")
    with pytest.raises(InputError) as info:
        load_model(path)
    assert info.value.problems[0].row == 2
