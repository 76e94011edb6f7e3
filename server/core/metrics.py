"""Prometheus metrics of one server process (served at GET /metrics by the HTTP server).

Runs in the server process. Counters and histograms are updated by the tools and the
evaluation threads; gauges that describe the shared database (nodes by status, pending
nodes, skill-memory rules) are read at scrape time, so every server on a data directory
reports the same tree. Each Service has its own registry (several may live in one process).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger("adaexplore.server")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TOOL_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
EVAL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class _StateCollector(Collector):
    """Gauges read from the database and the process at scrape time."""

    def __init__(self, nodes_by_status: Callable[[], dict[str, int]], queue_depth: Callable[[], int],
                 memory_rules: Callable[[], dict[str, int] | None]):
        self.nodes_by_status, self.queue_depth, self.memory_rules = nodes_by_status, queue_depth, memory_rules

    def collect(self) -> Iterator[Any]:
        nodes = GaugeMetricFamily("adaexplore_nodes", "Candidate nodes in the database by status (all servers)",
                                  labels=["status"])
        for status, n in sorted(self.nodes_by_status().items()):
            nodes.add_metric([status], n)
        yield nodes
        yield GaugeMetricFamily("adaexplore_evaluation_queue_depth",
                                "Evaluations this process holds: running or waiting for a worker",
                                value=self.queue_depth())
        rules = self.memory_rules()
        if rules is not None:
            fam = GaugeMetricFamily("adaexplore_memory_rules", "Skill-memory rules by state", labels=["state"])
            for state, n in sorted(rules.items()):
                fam.add_metric([state], n)
            yield fam


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.evaluations = Counter("adaexplore_evaluations", "Evaluations this process finished, by status",
                                   ["status"], registry=self.registry)
        self.evaluation_seconds = Histogram("adaexplore_evaluation_seconds",
                                            "Wall time of an evaluation, from submission to result",
                                            buckets=EVAL_BUCKETS, registry=self.registry)
        self.tool_seconds = Histogram("adaexplore_tool_seconds", "Latency of a tool call as the server sees it",
                                      ["tool"], buckets=TOOL_BUCKETS, registry=self.registry)
        self.tool_errors = Counter("adaexplore_tool_errors", "Tool calls answered with an error", ["tool"],
                                   registry=self.registry)
        self.leases_expired = Counter("adaexplore_leases_expired",
                                      "Evaluations of a dead server that this process marked failed",
                                      registry=self.registry)

    def watch_state(self, nodes_by_status: Callable[[], dict[str, int]], queue_depth: Callable[[], int],
                    memory_rules: Callable[[], dict[str, int] | None]) -> None:
        self.registry.register(_StateCollector(nodes_by_status, queue_depth, memory_rules))

    def render(self) -> bytes:
        return generate_latest(self.registry)
