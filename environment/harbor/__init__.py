"""Harbor packaging: export task directories as Harbor tasks (``spu harbor export``); docs/harbor.md."""
