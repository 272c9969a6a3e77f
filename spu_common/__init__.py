"""The ground floor every part stands on: JSON and YAML files, console output of the commands, the error codes
shared by the server's domains, and the benchmark's contract that crosses parts (the task and answers
format, submission validation, rank agreement, the scoring rules, the audit log's format and its ``spu audit``
readers). It imports no part of the project (``tools_server``, ``scaffold``, ``environment``, ``spu``), so
each of them may import it."""
