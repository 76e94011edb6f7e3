"""The errors of the server's application core: a caller's mistake, or a state the caller must wait out.

Runs in the server process and in CLI commands. The core (`*_service`, `skill_memory`, `inputs`) raises
these and knows nothing of MCP; the MCP face (`face/tools`) turns every one of them into a tool error
in one place, and the CLI prints them. Each message says how to fix the call. A failing kernel is
a result, never an error.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A call the server cannot carry out as made; the message says what to do instead."""


class NotFound(ServiceError):
    """The call names a task, node, expansion, rule or merge that does not exist."""


class InvalidRequest(ServiceError):
    """The call's arguments cannot work together, or name something in a state that forbids the call."""


class Unavailable(ServiceError):
    """Nothing is wrong with the call, but the server cannot serve it now (shutting down, a busy memory)."""
