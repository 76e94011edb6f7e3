"""What starts, confines and talks to the worker processes.

The trusted evaluator's side (`pool`, `frames`, `gpu_lock`) and the warm parent that forks one
worker per job (`warm_parent`, `procs`), the sandbox each worker enters before any task or candidate
code runs (`confine`, `seccomp`), plus the framing all use on their pipes and sockets (`wire`),
the rings of shared memory through which outputs reach the judge (`ring`, `vmm`), and the
thread that starts the warm parent and the judge so that they die with the server (`launcher`).
Nothing here runs candidate code.
"""
