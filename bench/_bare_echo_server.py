"""The baseline: a bare MCPServer from the official SDK with one echo tool, no spu machinery."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def echo(text: str = "") -> dict:
    return {"text": text}


if __name__ == "__main__":
    server.run("stdio")
