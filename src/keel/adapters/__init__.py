"""Adapters: the hook dialects of Claude Code, Codex CLI and Gemini CLI.

An adapter turns a client's hook stdin JSON into keel's canonical values (``HookInput``,
``ToolCall``, ``ToolResult``), asks the guard, and writes the answer back in the client's own
dialect. Modules:

- ``protocol``: agents, event names, ``HookInput`` and ``parse_hook_input``;
- ``tools``: every tool shape to a ``ToolCall`` / ``ToolResult``;
- ``dialects``: what each client understands on stdout, stderr and the exit code;
- ``runner``: ``run_hook``, the fail-closed wrapper with an internal deadline;
- ``install``: registering keel's hooks in a client's project settings.

Nothing here is imported by the core; this package itself imports nothing, so the hook path
pays only for the modules it uses.
"""
