"""The hook process, its daemon and the wire between them; client dialects."""
