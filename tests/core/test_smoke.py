def test_system_info_over_stdio(mcp_server):
    info = mcp_server.call_ok("system_info")
    assert info["cpu_cores"] >= 1
    assert info["engines"]["rdkit"]["importable"] is True
    assert info["provenance"]["tool"] == "system_info"
