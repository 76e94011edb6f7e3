"""The server's MCP face: the MCP server, its tools, resources and prompts, auth, transports, the CLI.

Runs in the server process (and, for `cli` and `demo`, in the user's shell). This is the only part of
adaexplore that imports `mcp`: it turns tool calls into calls on the core (`server/core/`) and the
core's domain errors into tool errors, in one place (`tools`).
"""
