"""The server's application core: the services behind the tools, their store, leases and settings.

Runs in the server process and in CLI commands that change state. Nothing here speaks MCP (a test
holds it to that): the core takes plain arguments, returns the tool contracts of `models`, and
raises the domain errors of `errors`, which only the face (`server/face/`) turns into tool errors.
"""
