"""Run by tests/test_distributed_launch.py under ``tinytorch launch``: one line per rank with
its rank, world size, thread settings and arguments."""
import os
import sys

from tinytorch import distributed as dist, get_num_threads

dist.init()
print(f"rank {dist.rank()} of {dist.world_size()} local {dist.local_rank()} "
      f"TINYTORCH_NUM_THREADS={os.environ.get('TINYTORCH_NUM_THREADS')} runtime_threads={get_num_threads()} "
      f"args={sys.argv[1:]}", flush=True)
