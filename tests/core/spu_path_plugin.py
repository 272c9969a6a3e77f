"""A plugin-style tool module (loaded through SPU_TOOL_MODULES) with path-typed fields, nested included:
the registry walk must find and guard them like the project's own."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tools_server.core.paths import InputPath
from tools_server.core.registry import tool


class Source(BaseModel):
    data_file: InputPath = Field(..., description="a data file")


class ReadInput(BaseModel):
    sources: list[Source] = Field(..., max_length=3, description="files to count")
    notes_path: InputPath | None = Field(None, description="an optional notes file")


@tool(name="plugin_count_bytes", resource="instant")
def plugin_count_bytes(args: ReadInput) -> dict:
    """Count the bytes of the given files."""
    return {"bytes": sum(len(open(s.data_file, "rb").read()) for s in args.sources)}
