"""What every part of adaexplore shares and none of them owns: the vocabulary and the database policy.

Imported by every process (server, CLI, the evaluator's processes). `evaluator`, `search` and `skills`
never import each other, and only `server` joins them; all four may import this package, which imports
none of them (and neither torch nor MCP).
"""
