"""The benchmark side: task format, submission validation and recovery, grading, chance, statistics."""
