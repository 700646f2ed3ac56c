"""The council as servers: `collective serve` (OpenAI-compatible HTTP) and `collective mcp`.

`runs` holds what both share (one open session, admitted runs and their events), `app` the
HTTP application, `openai_shapes` the protocol's shapes, `mcp_server` the MCP tools, `server`
the process that serves, and `settings` their own options (docs/serving.md).
"""

__all__: list[str] = []
