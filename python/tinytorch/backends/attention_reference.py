"""attention_reference: the import path of the tiled NumPy FlashAttention before it moved to
backends/reference/flash_attention.py -- this name is that module itself, not a copy.
Assumes: backends/reference.

Owns only the old import path; assumes backends/reference/flash_attention.py.
"""
import sys

from .reference import flash_attention

sys.modules[__name__] = flash_attention
