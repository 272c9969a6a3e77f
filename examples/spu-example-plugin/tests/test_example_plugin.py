import pytest
from spu_example_plugin.tools import BufferInput, example_buffer_ph

from tools_server.plugin import ToolError


def test_equimolar_buffer_has_ph_equal_to_pka():
    # acetate buffer, pKa 4.76: equal acid and base give pH = pKa
    assert example_buffer_ph(BufferInput(pka=4.76, acid_molar=0.1, base_molar=0.1)).ph == 4.76


def test_extreme_ratio_is_refused():
    with pytest.raises(ToolError) as err:
        example_buffer_ph(BufferInput(pka=4.76, acid_molar=1.0, base_molar=1e-5))
    assert err.value.code == "buffer_out_of_range"
