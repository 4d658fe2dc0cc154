"""Benchmark evaluation: metrics, results store, episode evaluation, runners and reports."""
