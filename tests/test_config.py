import json

import pytest

from probing_lab.elmo import ElmoBiLM, ElmoOptions, OptionsError, get_preset


@pytest.mark.parametrize("name,count", [("original", 93_600_848), ("medium", 28_027_728), ("small", 13_593_296)])
def test_released_preset_parameter_counts(name, count):
    assert ElmoBiLM(get_preset(name)).count_parameters() == count


def test_options_round_trip_keeps_unknown_keys(tmp_path):
    data = get_preset("small").to_dict()
    data["lstm"]["n_tokens_vocab"] = 793471  # a bilm-tf training key
    data["dropout"] = 0.1
    path = tmp_path / "options.json"
    path.write_text(json.dumps(data))
    loaded = ElmoOptions.load(path)
    assert loaded == get_preset("small")
    loaded.save(tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text()) == data


def test_missing_field_is_named(tmp_path):
    data = get_preset("small").to_dict()
    del data["lstm"]["projection_dim"]
    with pytest.raises(OptionsError, match="lstm.projection_dim"):
        ElmoOptions.from_dict(data)


def test_bad_values_rejected():
    data = get_preset("small").to_dict()
    data["char_cnn"]["activation"] = "gelu"
    with pytest.raises(OptionsError, match="activation"):
        ElmoOptions.from_dict(data)
    with pytest.raises(KeyError, match="unknown ELMo preset"):
        get_preset("huge")
