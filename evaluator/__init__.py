"""Evaluator: tasks, sandboxed candidate workers, correctness, timing and anti-cheat checks."""
