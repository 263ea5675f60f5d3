"""Sandboxed read-only probes: a scratch copy, an unprivileged uid, no network."""
