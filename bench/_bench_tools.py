"""Tools that exist only for the benchmarks (loaded through SPU_TOOL_MODULES)."""

from pydantic import BaseModel

from tools_server.plugin import ToolResult, tool


class EchoInput(BaseModel):
    text: str = ""


class Echo(ToolResult):
    """Declared, so a call pays for the result check and the client's schema validation too."""

    text: str


@tool(name="bench_noop_job", resource="cpu", cacheable=False)
def bench_noop_job(args: EchoInput) -> Echo:
    """Return the input from a worker process: the cost of the job machinery alone."""
    return {"text": args.text}


@tool(name="bench_echo", resource="instant", cacheable=False)
def bench_echo(args: EchoInput) -> Echo:
    """Return the input from the server process: the cost of the spu dispatch path alone."""
    return {"text": args.text}
