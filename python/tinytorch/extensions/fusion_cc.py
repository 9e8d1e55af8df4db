"""fusion_cc: the import path of compile_graph's native executors before they moved behind
the door, to backends/fusion/executors.py -- this name is that module itself, not a copy.
Assumes: backends/fusion.

Owns only the old module name.
"""
import sys

from ..backends.fusion import executors

sys.modules[__name__] = executors
