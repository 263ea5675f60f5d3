"""``keel mcp``: keel's guarded tools as an MCP server, for any MCP client.

The tools are ``keel run``'s (``read_file``, ``search``, ``list_files``, ``run``,
``apply_patch``, ``write_file``, ``run_plan``: the same schemas and implementations, a command
contained by ``keel exec``) and four of keel's own (``diff``, ``checkpoint``, ``rollback``,
``status``): ``MCP_TOOLS``. Each MCP connection is one journal session (agent ``mcp``,
``McpSession``) whose every call goes through ``Guard.decide`` and ``Guard.observe``: the
emergency stop, the policy, the monitor, the judge's verdicts, checkpoints and the journal. A
call keel does not allow is a tool error (``isError``) carrying the rule, the reason and the
suggestion, in its text and in ``structuredContent.decision``; the monitor's guidance rides on
results (after the output, and as ``structuredContent.guidance``). Any internal error is an
error result: keel fails closed.

``serve`` runs it over stdio or streamable HTTP (127.0.0.1) with the official SDK (the
``keel-guard[mcp]`` extra, imported only when a server starts).
"""

from keel.mcp._server import announcement, require_sdk, serve
from keel.mcp._session import McpRules, McpSession, Reply, Sessions
from keel.mcp._tools import AGENT, MCP_SCHEMAS, MCP_TOOLS, McpTool

__all__ = [
    "AGENT",
    "MCP_SCHEMAS",
    "MCP_TOOLS",
    "McpRules",
    "McpSession",
    "McpTool",
    "Reply",
    "Sessions",
    "announcement",
    "require_sdk",
    "serve",
]
