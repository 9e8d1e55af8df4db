"""What the MPI tests share: the launcher (the venv's mpirun first, as ``tinytorch launch``
finds it), the environment (root allowed, one runtime thread per rank, oversubscription on
2 shared cores) and a bounded run of a worker script under ``mpirun -n N`` or as one process."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch import distributed as dist
from tinytorch.distributed.launcher import find_launcher

HERE = Path(__file__).parent
OK, WHY = dist.available()
try:
    MPIRUN = find_launcher()
except FileNotFoundError as e:
    MPIRUN, WHY = None, (WHY if not OK else str(e))
needs_mpi = pytest.mark.skipif(not (OK and MPIRUN), reason=WHY)
TIMEOUT = 120  # seconds for one run of 2 ranks on a loaded 2-core machine


def env(**extra):
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                TINYTORCH_NUM_THREADS="1", OMP_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1", **extra)


def run(script, args, n, timeout=TIMEOUT):
    """Run ``HERE/script args`` on n ranks (n = 1: a plain process); returns CompletedProcess."""
    cmd = [sys.executable, str(HERE / script)] + [str(a) for a in args]
    if n > 1:
        cmd = [MPIRUN, "-n", str(n)] + cmd
    return subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=timeout)


def load_params(path):
    z = np.load(path)
    return [z[k] for k in sorted((k for k in z.files if k.startswith("arr_")), key=lambda s: int(s.split("_")[1]))]
