"""The resident hook server (``keel hookd``) and the thin relay every hook process tries first.

A hook process that only relays its stdin to a process that has everything loaded costs
little more than the interpreter's own start. ``relay`` (C-level modules only) sends the
hook's argv, environment, working directory and stdin to ``<root>/.keel/hookd.sock`` and
writes back the answer; ``server`` answers each request with exactly the in-process code
path (``keel.cli.hook.answer``), one request at a time, under the request's own environment
and working directory. Anything that goes wrong on the relay side (no socket, a stale one, a
daemon killed mid-request, a timeout, a version mismatch) falls back to deciding in the hook
process itself, so the daemon never makes keel fail open.

This package imports nothing at import time.
"""
