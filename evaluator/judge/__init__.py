"""The judge: a trusted process per evaluator that holds reference outputs and compares.

Workers (sandboxed, untrusted) stream their outputs through the evaluator to the judge, which
keeps a task's reference outputs where they are needed (on the GPU on a GPU machine) within a
stated memory budget, evicted least recently used, and compares a candidate's outputs there.
Only verdicts (status, max abs/rel error and where, fraction out of tolerance) come back, so
the server process never holds outputs, and no candidate code ever runs in the judge.

`client.py` runs in the evaluator (the server process); `process.py` and `reference_store.py` run in the
judge process.
"""
