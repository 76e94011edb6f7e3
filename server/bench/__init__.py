"""`adaexplore bench`: an end-to-end benchmark runner that drives the search through the server's MCP tools.

Runs in the user's shell process, as a client: it starts `adaexplore serve` as a stdio subprocess per compared
variant and talks to it only through the MCP tools and prompts an external agent uses. The kernels come from an
OpenAI-compatible chat endpoint (or a replay of recorded kernels). Nothing here imports the server, the
evaluator, the search or the skill memory; only `adaexplore.common` and the MCP SDK's client.
"""
