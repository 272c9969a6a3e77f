"""A plugin-style tool module (loaded through SPU_TOOL_MODULES) whose tools compute with NumPy, as engines
do: NumPy scalars, a NaN where "not a number" is an answer, a NaN where it is the engine failing, and the
dict a plugin returned before results were typed. tests/core/test_output_schemas.py calls them through the
real MCP client."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from tools_server.plugin import (
    FiniteOrNull,
    Item,
    ItemsResult,
    ToolContext,
    ToolError,
    ToolResult,
    table_result,
    tool,
)


class Samples(BaseModel):
    values: list[float] = Field(min_length=1, max_length=100, description="numbers to summarise")


class Moments(Item):
    mean: float | None = None
    #: the sample's spread over its mean; null for a sample whose mean is 0
    relative_spread: FiniteOrNull = None
    n: int | None = None


class Summary(ItemsResult):
    items: list[Moments]
    dtype: str


@tool(name="typed_moments", resource="cpu", read_only=True, idempotent=True)
def typed_moments(args: Samples, ctx: ToolContext) -> Summary:
    """For every prefix of the values, in float32 as a GPU engine would: mean and std/mean (null where the
    mean is 0); a prefix whose mean is not finite (an infinity in it) is that item's engine_error."""
    data = np.asarray(args.values, dtype=np.float32)
    items = []
    for k in range(1, len(data) + 1):
        with np.errstate(all="ignore"):
            mean = data[:k].mean()  # a NumPy float32
            spread = data[:k].std() / mean
        try:
            items.append(Moments(index=k - 1, ok=True, mean=mean, relative_spread=spread, n=int(k)))
        except ToolError as exc:
            items.append(Moments.failed(k - 1, exc))
    return Summary(dtype=str(data.dtype), **table_result(ctx, "moments", items))


class Ratio(ToolResult):
    ratio: float


@tool(name="typed_ratio", resource="instant", read_only=True, idempotent=True)
def typed_ratio(args: Samples) -> Ratio:
    """values[0] / values[1] in NumPy: a zero divisor gives infinity, which is the tool failing."""
    with np.errstate(all="ignore"):
        return Ratio(ratio=np.float64(args.values[0]) / np.float64(args.values[-1]))


@tool(name="typed_old_dict", resource="instant", read_only=True, idempotent=True)
def typed_old_dict(args: Samples) -> Ratio:
    """Declares a result type but returns a dict, as plugins did before results were typed."""
    return {"ratio": args.values[0]}
