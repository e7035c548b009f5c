"""`amc mcp`: the control plane as tools for an AI agent, over the Model Context Protocol.

An agent (any MCP client: a desktop assistant, an IDE, an agent framework) starts a session
on a phone of the fleet, observes the screen (a screenshot and the indexed element list
together), acts on an element by its index, a selector or a point, one step at a time, and
ends the session; or submits a whole plan and follows, steers, pauses or cancels it. Every
tool is a thin translation of the control plane's HTTP API (specs/protocol.md) with a caller's token: the server keeps the leases,
the fencing and the evidence; this package only asks and tells.

- `api`: the routes, awaitable, over a `Transport` the command line provides;
- `session_tools`, `task_tools`: the tools and their descriptions, written for a model that
  has never seen amc;
- `describe`: the sentences the tools answer with, made only from what the server said;
- `targets`: a tool's index, selector or point as the action's wire form (the Host Agent
  resolves it, on the screen as it is when the action runs);
- `errors`: refusals and bad arguments as one sentence a model can act on;
- `server`: the MCP server, on stdio or streamable HTTP.
"""
