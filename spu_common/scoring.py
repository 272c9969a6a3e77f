"""The scoring rules the grader applies and the working method tells models (one source for both)."""

#: The task score of a file the strict grader rejects, and the rho of a missing or invalid group (which
#: keeps its weight): the worst a Spearman correlation can be.
FAILED = -1.0
#: The largest ``rankings.json`` the grader reads.
MAX_SUBMISSION_BYTES = 1024 * 1024
