import pytest
from spu_example_plugin.tools import BufferInput, SeriesInput, example_buffer_ph, example_buffer_series

from tools_server.plugin import ToolContext, ToolError


def test_equimolar_buffer_has_ph_equal_to_pka():
    # acetate buffer, pKa 4.76: equal acid and base give pH = pKa
    assert example_buffer_ph(BufferInput(pka=4.76, acid_molar=0.1, base_molar=0.1)).ph == 4.76


def test_extreme_ratio_is_refused():
    with pytest.raises(ToolError) as err:
        example_buffer_ph(BufferInput(pka=4.76, acid_molar=1.0, base_molar=1e-5))
    assert err.value.code == "buffer_out_of_range"


def test_a_series_answers_every_ratio_and_fails_only_the_one_out_of_range():
    out = example_buffer_series(SeriesInput(pka=4.76, ratios=[1.0, 10.0, 1e5]), ToolContext("s", "j"))
    assert [p.ph for p in out.items[:2]] == [4.76, 5.76]  # one pH unit per decade of the ratio
    assert out.items[2].ok is False and out.items[2].error.code == "buffer_out_of_range"
