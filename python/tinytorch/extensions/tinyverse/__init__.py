"""TinyVerse data systems: memory-mapped token shards, generated micro-corpora, an AST gate.

    shards.py   pack_tokens, TokenShard, ShardDataset, ShardBatcher  (zero-copy batches)
    corpora.py  generate_tinypy, generate_tinytalks, Corpus          (closed-world, < 100 KB)
    gate.py     ast_validity_rate, StreamingASTGate, greedy_complete, evaluate_ast_gate,
                ASTValidityHook, NextTokenLoss, run_ast_gate_training (compiler in the loop)

This package is the entry point (``tinytorch.extensions.tinyverse``); its three modules hold the
implementation, one family in one folder (as ``extensions/scalesim/``).

The pipeline, offline: generate a corpus from a seed -> the package's character Tokenizer ->
``pack_tokens`` into a shard -> ``TokenShard`` maps it -> ``ShardBatcher`` (or
``DataLoader(ShardDataset(...))``) serves views of the map as Tensors -> ``Trainer.train_epoch``
-> ``ASTValidityHook`` scores greedy completions of held-out prompts with ``ast.parse``.
See docs/tinyverse.md.

Owns the subpackage's names (shards, corpora, gate); assumes the core's tokenizer,
data loader and GPT, as its modules say.
"""
from __future__ import annotations

from .shards import FORMAT_VERSION, ShardBatcher, ShardDataset, TokenShard, pack_tokens, vocab_hash
from .corpora import MAX_CORPUS_BYTES, Corpus, generate_tinypy, generate_tinytalks
from .gate import (ASTValidityHook, NextTokenLoss, StreamingASTGate, ast_validity_rate,
                       evaluate_ast_gate, first_complete_function, greedy_complete, is_valid_function,
                       run_ast_gate_training)

__all__ = ["pack_tokens", "TokenShard", "ShardDataset", "ShardBatcher", "vocab_hash", "FORMAT_VERSION",
           "generate_tinypy", "generate_tinytalks", "Corpus", "MAX_CORPUS_BYTES",
           "ast_validity_rate", "StreamingASTGate", "first_complete_function", "is_valid_function",
           "greedy_complete", "evaluate_ast_gate", "ASTValidityHook", "NextTokenLoss",
           "run_ast_gate_training"]
