"""What starts, confines and talks to the worker processes.

The trusted evaluator's side (`pool`, `gpu_lock`) and the warm parent that forks one worker per
job (`zygote`, `procs`), plus the framing both use on their pipes and sockets (`wire`). Nothing
here runs candidate code.
"""
