"""The kernel every layer stands on: standard library only, imports nothing above it."""
