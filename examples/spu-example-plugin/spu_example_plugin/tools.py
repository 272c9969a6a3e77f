"""Two small tools, one instant and one run as a job, to show the whole pattern."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from tools_server.plugin import ToolContext, ToolError, ToolResult, tool


class BufferInput(BaseModel):
    pka: float = Field(description="pKa of the weak acid at the working temperature.")
    acid_molar: float = Field(gt=0, description="Concentration of the acid form, mol/L.")
    base_molar: float = Field(gt=0, description="Concentration of the conjugate base, mol/L.")


class BufferPh(ToolResult):
    ph: float
    base_to_acid_ratio: float


@tool(name="example_buffer_ph", resource="instant", read_only=True, idempotent=True)
def example_buffer_ph(args: BufferInput) -> BufferPh:
    """pH of a buffer from the Henderson-Hasselbalch equation, pH = pKa + log10([A-]/[HA]).
    Valid when both concentrations are much larger than [H+] and [OH-]."""
    ratio = args.base_molar / args.acid_molar
    if not 1e-3 <= ratio <= 1e3:
        raise ToolError(
            "buffer_out_of_range",
            f"base/acid ratio {ratio:.3g} is outside 1e-3..1e3, where the equation no longer holds.",
        )
    return BufferPh(ph=round(args.pka + math.log10(ratio), 4), base_to_acid_ratio=ratio)


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
