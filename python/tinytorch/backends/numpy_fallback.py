"""numpy_fallback: the import path of the NumPy back end before it became the folder
backends/reference/ -- this name is that module itself (one module object, so
``numpy_fallback.gemm is reference.gemm``), not a copy. Assumes: backends/reference.

Owns only the old import path; assumes backends/reference/.
"""
import sys

from . import reference

sys.modules[__name__] = reference
