"""The ground floor every part stands on: JSON files, console output of the commands, and the error codes
shared by the server's domains. It imports no part of the project (``tools_server``, ``scaffold``,
``environment``, ``spu``), so each of them may import it."""
