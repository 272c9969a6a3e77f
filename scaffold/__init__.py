"""spu reference agent: a minimal loop that drives any model API through the spu tools."""
