"""What runs inside a forked worker process, next to the candidate's code.

`jobs` (the runners for reference, candidate and timing jobs), `harness` (loading, inputs,
reporting), `guards` (what the harness watches), `timing` (the measurement loops) and
`kernel_capture` (Triton launch metadata for profiling), and `warm_start`, the warm parent's
entry point with the job table that says which of them runs each kind of job. They are imported
in the warm parent before any candidate exists, so each worker starts with the harness's
originals bound.
Workers report facts only; the verdicts are given on the trusted side.
"""
