"""Three small tools to show the whole pattern: one instant, one batch (one typed item per input, a bad
input its item's error), one run as a job."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BaseModel, Field

from tools_server.plugin import Item, ItemsResult, ToolContext, ToolError, ToolResult, table_result, tool


class BufferInput(BaseModel):
    pka: float = Field(description="pKa of the weak acid at the working temperature.")
    acid_molar: float = Field(gt=0, description="Concentration of the acid form, mol/L.")
    base_molar: float = Field(gt=0, description="Concentration of the conjugate base, mol/L.")


class BufferPh(ToolResult):
    ph: float
    base_to_acid_ratio: float


def henderson_hasselbalch(pka: float, ratio: float) -> float:
    """pH = pKa + log10([A-]/[HA]); raises ``buffer_out_of_range`` where the equation no longer holds."""
    if not 1e-3 <= ratio <= 1e3:
        raise ToolError(
            "buffer_out_of_range",
            f"base/acid ratio {ratio:.3g} is outside 1e-3..1e3, where the equation no longer holds.",
        )
    return round(pka + math.log10(ratio), 4)


@tool(name="example_buffer_ph", resource="instant", read_only=True, idempotent=True)
def example_buffer_ph(args: BufferInput) -> BufferPh:
    """pH of a buffer from the Henderson-Hasselbalch equation, pH = pKa + log10([A-]/[HA]).
    Valid when both concentrations are much larger than [H+] and [OH-]."""
    ratio = args.base_molar / args.acid_molar
    return BufferPh(ph=henderson_hasselbalch(args.pka, ratio), base_to_acid_ratio=ratio)


class SeriesInput(BaseModel):
    pka: float = Field(description="pKa of the weak acid at the working temperature.")
    ratios: list[Annotated[float, Field(gt=0)]] = Field(
        min_length=1, max_length=10_000, description="Base/acid concentration ratios [A-]/[HA]."
    )


class BufferPoint(Item):
    """One ratio of the series: its pH, or (ok: false) why the equation does not hold there."""

    ratio: float | None = None
    ph: float | None = None


class BufferSeries(ItemsResult):
    pka: float
    items: list[BufferPoint]


@tool(name="example_buffer_series", resource="instant", read_only=True, idempotent=True)
def example_buffer_series(args: SeriesInput, ctx: ToolContext) -> BufferSeries:
    """pH of a buffer at each base/acid ratio (Henderson-Hasselbalch), one item per ratio in order; a ratio
    outside 1e-3..1e3 is that item's error (buffer_out_of_range), the others still answer. A long series
    comes as a CSV artifact (table_csv) with a preview inline."""
    items = []
    for index, ratio in enumerate(args.ratios):
        try:
            items.append(
                BufferPoint(index=index, ok=True, ratio=ratio, ph=henderson_hasselbalch(args.pka, ratio))
            )
        except ToolError as exc:
            items.append(BufferPoint.failed(index, exc, ratio=ratio))
    return BufferSeries(pka=args.pka, **table_result(ctx, "buffer_series", items))


class GasInput(BaseModel):
    temperature_k: float = Field(gt=0, description="Temperature in kelvin.")
    pressure_pa: float = Field(gt=0, description="Pressure in pascal.")


class MolarVolume(ToolResult):
    molar_volume_l_per_mol: float


@tool(name="example_molar_volume", resource="cpu", read_only=True, idempotent=True, engines=("scipy",))
def example_molar_volume(args: GasInput, ctx: ToolContext) -> MolarVolume:
    """Molar volume of an ideal gas, in L/mol, computed in a worker process (a stand-in for real work)."""
    from scipy.constants import R

    ctx.set_engine("scipy.constants")
    return MolarVolume(molar_volume_l_per_mol=R * args.temperature_k / args.pressure_pa * 1000)
