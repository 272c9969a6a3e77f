"""Results are typed all the way to the wire: a tool builds its declared model, the registry reads it back
in strict mode from its JSON and sends the model's own dump. What the dump holds validates against the
published ``outputSchema`` under a JSON Schema validator, as a client checks it, and is strict JSON (no NaN,
no infinity). The values that broke the schema on 39e2847 (``"yes"`` for a bool, a NumPy integer, a float32
NaN) are refused where the result is built, with a code that says whose fault it is."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.validators import validator_for
from pydantic import BaseModel

from tools_server.core.errors import ToolError
from tools_server.core.registry import tool
from tools_server.core.results import (
    FiniteOrNull,
    Item,
    ItemsResult,
    ResultModel,
    ToolResult,
    output_schema,
    wire_form,
)


class Number(BaseModel):
    x: float


class Report(ResultModel):
    converged: bool
    n_steps: int


class Probe(ToolResult):  # module level: annotations are resolved by name
    energy_hartree: float
    n_atoms: int
    converged: bool
    logp: FiniteOrNull = None
    report: Report | None = None
    extras: dict[str, Any] | None = None


class ProbeItem(Item):
    energy_hartree: float | None = None


class ProbeBatch(ItemsResult):
    items: list[ProbeItem]


def _schema(model: type[ToolResult]) -> dict:
    return output_schema(model, job=False)


def _fits(schema: dict, value: dict) -> list[str]:
    validator = validator_for(schema)(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]


def test_a_result_model_is_sent_as_its_dump_and_fits_its_schema():
    @tool(name="t_probe")
    def probe(args: Number) -> Probe:
        """Doc."""
        return Probe(
            energy_hartree=np.float64(args.x),
            n_atoms=3,
            converged=True,
            report=Report(converged=True, n_steps=4),
        )

    sent = probe.__spu_tool__.call(Number(x=-76.4))
    assert sent == {
        "energy_hartree": -76.4,
        "n_atoms": 3,
        "converged": True,
        "report": {"converged": True, "n_steps": 4},
    }
    assert type(sent["energy_hartree"]) is float  # NumPy's float64 became a float
    assert _fits(_schema(Probe), sent) == []


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("converged", "yes", "converged: Input should be a valid boolean"),
        ("n_atoms", np.int64(3), "numpy.int64"),
        ("converged", np.bool_(True), "numpy.bool"),
        ("n_atoms", 3.0, "n_atoms: Input should be a valid integer"),
    ],
)
def test_a_value_of_another_type_is_an_internal_error_naming_the_field(field, value, named):
    """On 39e2847 these reached the wire as they were ("yes", or a NumPy integer written as the string
    "3" by the worker's JSON writer), breaking the published schema."""
    values = {"energy_hartree": -1.0, "n_atoms": 3, "converged": True, field: value}
    with pytest.raises(ToolError) as err:
        Probe(**values)
    assert err.value.code == "internal_error"
    assert named in err.value.message and "Probe" in err.value.message


@pytest.mark.parametrize("value", [float("nan"), np.float32("nan"), np.float64("inf"), -math.inf])
def test_a_number_that_is_not_finite_is_the_engines_error(value):
    with pytest.raises(ToolError) as err:
        Probe(energy_hartree=value, n_atoms=1, converged=True)
    assert err.value.code == "engine_error" and "energy_hartree" in err.value.message


def test_finite_or_null_carries_null_for_nan_and_says_so_in_the_schema():
    sent = wire_form(Probe(energy_hartree=-1.0, n_atoms=1, converged=True, logp=np.float32("nan")))
    assert sent["logp"] is None
    assert _schema(Probe)["properties"]["logp"]["type"] == ["number", "null"]
    assert (
        wire_form(Probe(energy_hartree=-1.0, n_atoms=1, converged=True, logp=np.float32(1.5)))["logp"] == 1.5
    )


def test_a_batch_item_built_in_a_try_turns_the_engines_nan_into_its_own_error():
    items = []
    for index, energy in enumerate([-1.5, float("nan")]):
        try:
            items.append(ProbeItem(index=index, ok=True, energy_hartree=energy))
        except ToolError as exc:
            items.append(ProbeItem.failed(index, exc))
    sent = wire_form(ProbeBatch(items=items))
    assert sent["items"][0] == {"index": 0, "ok": True, "energy_hartree": -1.5}
    assert sent["items"][1]["ok"] is False and sent["items"][1]["error"]["code"] == "engine_error"
    assert _fits(_schema(ProbeBatch), sent) == []


def test_what_changed_after_the_result_was_built_is_checked_too():
    """Assignment and a container changed in place skip the model's own validation; the wire form writes
    the JSON, reads it back strictly and walks what no type covers."""
    result = Probe(energy_hartree=-1.0, n_atoms=1, converged=True, extras={})
    result.n_atoms = np.int64(2)
    assert wire_form(result)["n_atoms"] == 2  # a NumPy integer assigned later is written as the integer
    result.converged = "yes"
    with pytest.raises(ToolError) as err:
        wire_form(result)
    assert err.value.code == "internal_error" and "Probe" in err.value.message
    result.converged = True
    result.extras["lost"] = float("inf")
    with pytest.raises(ToolError) as err:
        wire_form(result)
    assert err.value.code == "engine_error" and "extras.lost" in err.value.message
    batch = ProbeBatch(items=[])
    batch.items.append(ProbeItem.model_construct(index=0, ok=True, energy_hartree=float("nan")))
    with pytest.raises(ToolError) as err:
        wire_form(batch)
    assert err.value.code == "engine_error" and "ProbeItem: " in err.value.message
    assert "energy_hartree" in err.value.message


class Loose(BaseModel):
    value: float


class OpenBatch(ItemsResult):  # its items are the bare Item: no keys declared
    pass


def test_a_typed_tool_that_returns_a_dict_fails_with_a_hint_saying_what_to_return():
    """The way before results were typed: on 39e2847 the dict was checked loosely and sent as it was
    ("yes" for a bool went out); now it is refused, and the hint names the fix."""

    @tool(name="t_old_style")
    def old_style(args: Number) -> Probe:
        """Doc."""
        return {"energy_hartree": args.x, "n_atoms": 1, "converged": "yes"}

    with pytest.raises(ToolError) as err:
        old_style.__spu_tool__.call(Number(x=-1.0))
    assert err.value.code == "internal_error" and "declared to return Probe but returned dict" in str(
        err.value
    )
    assert "return Probe(...)" in err.value.hint


def test_a_batch_must_declare_its_item_type():
    with pytest.raises(TypeError, match="does not declare its items"):

        @tool(name="t_open_batch")
        def open_batch(args: Number) -> OpenBatch:
            """Doc."""
            return OpenBatch(items=[])


def test_a_result_type_must_be_a_tool_result():
    with pytest.raises(TypeError, match="must subclass ToolResult"):

        @tool(name="t_loose")
        def loose(args: Number) -> Loose:
            """Doc."""
            return Loose(value=args.x)


# values a tool might put in a float, int or bool field: Python and NumPy scalars of every kind, strings
scalars = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**62), max_value=2**62),
    st.booleans(),
    st.text(max_size=5),
    st.floats(allow_nan=True, allow_infinity=True, width=32).map(np.float32),
    st.floats(allow_nan=True, allow_infinity=True).map(np.float64),
    st.integers(min_value=-(2**31), max_value=2**31).map(np.int64),
    st.booleans().map(np.bool_),
)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(energy=scalars, n_atoms=scalars, converged=scalars, logp=scalars)
def test_whatever_a_tool_puts_in_a_result_the_wire_gets_a_schema_valid_strict_json_or_a_clear_error(
    energy, n_atoms, converged, logp
):
    schema = _schema(Probe)
    try:
        sent = wire_form(Probe(energy_hartree=energy, n_atoms=n_atoms, converged=converged, logp=logp))
    except ToolError as exc:
        non_finite = isinstance(energy, float | np.floating) and not math.isfinite(energy)
        fits_otherwise = (
            type(n_atoms) is int and type(converged) is bool and isinstance(logp, float | int | np.floating)
        )
        assert exc.code in ("engine_error", "internal_error")
        if exc.code == "engine_error":
            assert non_finite, exc.message
        elif non_finite and fits_otherwise and not isinstance(logp, bool):
            pytest.fail(f"a NaN energy alone should be engine_error: {exc.message}")
        return
    json.dumps(sent, allow_nan=False)  # strict JSON: raises on NaN or infinity
    assert _fits(schema, sent) == []
    assert type(sent["n_atoms"]) is int and type(sent["converged"]) is bool


class Node(ResultModel):  # contains itself: its reference must stay
    name: str
    children: list[Node] | None = None


class Tree(ToolResult):
    root: Node


def test_schemas_write_nested_models_in_place_and_keep_a_reference_only_for_recursion():
    """The Python SDK's validator resolves a $ref at each use; the schemas a client checks every result
    against carry none, except where a model contains itself."""
    schema = _schema(ProbeBatch)
    assert "$ref" not in json.dumps(schema) and "$defs" not in schema
    item = schema["properties"]["items"]["items"]
    assert item["additionalProperties"] is False and item["properties"]["error"]["type"] == ["object", "null"]
    tree = _schema(Tree)
    assert tree["properties"]["root"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert set(tree["$defs"]) == {"Node"}
    validator_for(tree).check_schema(tree)
    assert _fits(tree, {"root": {"name": "a", "children": [{"name": "b", "children": []}]}}) == []
    assert _fits(tree, {"root": {"name": "a", "children": [{"name": "b", "extra": 1}]}}) != []


class CountedBatch(ProbeBatch):
    n_molecules: int
    n_ok: int


def test_a_result_reads_summary_first_the_items_then_what_every_result_carries():
    # pydantic lists a base class's fields first: the items came before the counts, and an agent that keeps a
    # long result's head and tail lost them
    items = [ProbeItem(index=0, ok=True)]
    result = CountedBatch(items=items, n_molecules=1, n_ok=1, warnings=["w"], note="n")
    assert list(wire_form(result)) == ["n_molecules", "n_ok", "items", "warnings", "note"]
