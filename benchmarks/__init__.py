"""Benchmarks run by hand (`make bench`, `python -m benchmarks.run`); results go into RESULTS.md."""
