"""`amc mcp`: the control plane as tools for an AI agent, over the Model Context Protocol.

An agent (any MCP client: a desktop assistant, an IDE, an agent framework) starts a session
on a phone of the fleet, looks at the screen (a screenshot as an image, the UI tree as
compact text), acts one step at a time and ends the session; or submits a whole plan and
follows, steers, pauses or cancels it. Every tool is a thin translation of the control
plane's HTTP API (specs/protocol.md) with a caller's token: the server keeps the leases,
the fencing and the evidence; this package only asks and tells.

- `api`: the routes, awaitable, over a `Transport` the command line provides;
- `session_tools`, `task_tools`: the tools and their descriptions, written for a model that
  has never seen amc;
- `describe`: the sentences the tools answer with, made only from what the server said;
- `uitree`: a uiautomator dump made compact, and the element search of `tap_element`;
- `server`: the MCP server, on stdio or streamable HTTP.
"""
