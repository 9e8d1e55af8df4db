"""Compiler-in-the-loop evaluation: the AST validity rate of greedy completions, beside the loss.

Bottleneck it removes: the "syntactic illusion" of code models. Cross-entropy averages over
characters, so a model can reach a low loss and still emit functions that one missing colon or
one bad dedent makes unparseable; the loss cannot see it, the compiler can. This module puts
Python's own parser in the evaluation loop:

  * ``StreamingASTGate`` takes generated text piece by piece, as the tokens come. It finds the
    first ``def`` at column 0 and decides when that function is complete: at the end of the def
    line when it parses alone (``def f(x): return x``), at the first later
    line that starts at column 0 (the body has ended), or at a blank line once the text so far
    already passes ``ast.parse`` (the parser is tried at every blank line, so generation stops
    as soon as the function is whole instead of running to a token budget). The function is
    valid when ``ast.parse`` accepts it and it is one ``def`` (of the expected name, if given).
  * ``greedy_complete`` decodes greedily through the package's KV cache, one token at a time,
    feeding each token to a gate and stopping when the gate says the function is complete.
  * ``ast_validity_rate(completions)`` is the percentage of texts whose first complete function
    parses; ``evaluate_ast_gate`` runs the held-out prompts and scores them.
  * ``ASTValidityHook`` is the training-loop hook: called with (step, loss) after a training
    window, it evaluates the gate and appends step, loss, validity and the completions to its
    ``history``, the curve (``Trainer`` has no callback list, so a loop calls the hook between
    ``train_epoch`` windows; ``run_ast_gate_training`` is that loop).
  * ``run_ast_gate_training(seconds=60, ...)``: TinyPy -> character Tokenizer -> shard ->
    ``ShardBatcher`` -> the package's GPT trained by ``Trainer.train_epoch`` with AdamW, with
    the hook between windows, until ``seconds`` of training time (CPU seconds of the process by
    default: single-core time on one thread, whatever else shares the machine; evaluation time
    is not counted, and is reported apart). Returns the curve and the final completions.

Assumes: the core's GPT, Trainer, KV cache and cross-entropy, and the shards and corpora
of this subpackage.
"""
from __future__ import annotations

import ast
import os
import tempfile
import time

import numpy as np

from ...core import random as tt_random
from ...core.autograd import no_grad
from ...core.kv_cache import KVCache
from ...core.losses import cross_entropy
from ...core.optimizers import AdamW
from ...core.training import Trainer
from ...core.transformers import GPT
from .corpora import generate_tinypy
from .shards import ShardBatcher, TokenShard, pack_tokens

__all__ = ["StreamingASTGate", "first_complete_function", "is_valid_function", "ast_validity_rate",
           "greedy_complete", "evaluate_ast_gate", "ASTValidityHook", "NextTokenLoss",
           "run_ast_gate_training"]


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):  # ValueError: e.g. a NUL character
        return False
    return True


class StreamingASTGate:
    """Receives generated text piece by piece and marks the end of its first complete function.

    Args:
        expected_name: if given, a valid function must be named this.

    ``feed(piece)`` returns True once the function is complete (later pieces are ignored);
    ``close()`` ends the stream (a function still open runs to the end of the text).
    ``text`` is everything fed so far, ``function`` the function's text (None before it is
    complete), ``valid`` whether it parses as one ``def``, ``parse_attempts`` how many times
    the parser was tried.
    """

    def __init__(self, expected_name=None):
        self.expected_name = expected_name
        self.text = ""
        self.function = None
        self.parse_attempts = 0
        self._def_start = None   # index of the "def" that opens the function
        self._line_start = 0     # index where the current line begins
        self._body_lines = 0     # non-blank lines after the def line

    @property
    def done(self) -> bool:
        """True once the first function is complete."""
        return self.function is not None

    def feed(self, piece: str) -> bool:
        """Append ``piece`` to the stream; True when the first function is complete.

        Args:
            piece: the next generated text (one token's characters, or more).
        """
        if self.done:
            return True
        start = len(self.text)
        self.text += piece  # one append per piece; the scan below reads the new characters
        for pos in range(start, len(self.text)):
            self._scan(pos)
            if self.done:
                break
        return self.done

    def _finish(self, end: int) -> None:
        self.function = self.text[self._def_start:end]

    def _scan(self, pos: int) -> None:
        ch = self.text[pos]
        if self._def_start is None:  # still looking for "def " at column 0
            if ch == "\n":
                self._line_start = pos + 1
            elif pos == self._line_start + 3 and self.text[self._line_start:pos + 1] == "def ":
                self._def_start = self._line_start
            return
        if ch == "\n":
            if self._line_start == self._def_start:  # the def line ended: a one-line function?
                self.parse_attempts += 1
                if _parses(self.text[self._def_start:pos]):
                    self._finish(pos + 1)
                    return
            elif self._line_start > self._def_start:  # a line of the body (or after it) ended
                if self.text[self._line_start:pos].strip():
                    self._body_lines += 1
                elif self._body_lines:  # a blank line after a body: is the function whole?
                    self.parse_attempts += 1
                    if _parses(self.text[self._def_start:pos]):
                        self._finish(pos)
                        return
            self._line_start = pos + 1
            return
        if pos == self._line_start and not ch.isspace() and self._body_lines:
            self._finish(self._line_start)  # a dedent to column 0: the body has ended

    def close(self) -> None:
        """End of the stream: an open function runs to the end of the text."""
        if not self.done and self._def_start is not None:
            self._finish(len(self.text))

    @property
    def valid(self) -> bool:
        """Whether the complete function parses and is one ``def`` (of ``expected_name``)."""
        return self.function is not None and is_valid_function(self.function, self.expected_name)


def is_valid_function(source: str, expected_name=None) -> bool:
    """True when ``source`` parses and is exactly one function definition.

    Args:
        source: the function's text.
        expected_name: if given, the function must have this name.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return False
    return expected_name is None or tree.body[0].name == expected_name


def first_complete_function(text: str):
    """The text of the first complete function in ``text`` (as ``StreamingASTGate`` cuts it),
    or None when ``text`` holds no ``def`` at column 0.

    Args:
        text: generated text (usually the prompt followed by its completion).
    """
    gate = StreamingASTGate()
    gate.feed(text)
    gate.close()
    return gate.function


def ast_validity_rate(completions, expected_names=None) -> float:
    """The percentage (0..100) of ``completions`` whose first complete function parses.

    Args:
        completions: a non-empty list of generated texts (prompt + completion).
        expected_names: optional list, one function name per completion, that each valid
            function must define.
    """
    if isinstance(completions, str):
        raise TypeError("ast_validity_rate: completions must be a list of str, got one str")
    completions = list(completions)
    if not completions:
        raise ValueError("ast_validity_rate: no completions to score")
    if not all(isinstance(c, str) for c in completions):
        raise TypeError("ast_validity_rate: every completion must be a str")
    names = [None] * len(completions) if expected_names is None else list(expected_names)
    if len(names) != len(completions):
        raise ValueError(f"ast_validity_rate: {len(names)} expected names for {len(completions)} completions")
    valid = 0
    for text, name in zip(completions, names):
        function = first_complete_function(text)
        valid += function is not None and is_valid_function(function, name)
    return 100.0 * valid / len(completions)


def greedy_complete(model, tokenizer, prompt: str, max_new_tokens: int = 200, expected_name=None):
    """Greedy decoding of ``prompt`` streamed into a ``StreamingASTGate``; returns the gate.

    Args:
        model: a GPT (``forward(ids, kv_cache=...)``, ``max_seq_len``).
        tokenizer: the Tokenizer the model was trained with.
        prompt: the text to continue (e.g. a function signature).
        max_new_tokens: the token budget when the function never completes.
        expected_name: the function name the gate requires, if any.

    The gate's ``text`` is prompt + completion; ``function`` / ``valid`` give the verdict.
    """
    ids = list(tokenizer.encode(prompt))
    if not ids:
        raise ValueError("greedy_complete: the prompt is empty")
    gate = StreamingASTGate(expected_name)
    gate.feed(prompt)
    window = model.max_seq_len
    cache = KVCache.for_model(model, 1)
    was_training = model.training
    model.eval()
    try:
        with no_grad():
            logits = model(np.array([ids[-window:]], dtype=np.int64), kv_cache=cache).data[0, -1]
            for _ in range(int(max_new_tokens)):
                nxt = int(np.argmax(logits))
                ids.append(nxt)
                if gate.feed(tokenizer.decode([nxt])):
                    break
                if cache.length >= window:  # the window slides: rebuild from the last tokens
                    cache.reset()
                    logits = model(np.array([ids[-window:]], dtype=np.int64), kv_cache=cache).data[0, -1]
                else:
                    logits = model(np.array([[nxt]], dtype=np.int64), kv_cache=cache).data[0, -1]
    finally:
        model.train(was_training)
    gate.close()
    return gate


def evaluate_ast_gate(model, tokenizer, prompts, expected_names=None, max_new_tokens: int = 200) -> dict:
    """Greedy completions of ``prompts`` scored by the AST gate.

    Args:
        model: the GPT to evaluate.
        tokenizer: its Tokenizer.
        prompts: the held-out prompts (list of str).
        expected_names: optional function name per prompt.
        max_new_tokens: token budget per completion.

    Returns ``{"valid": count, "total": n, "rate": percent, "completions": [text, ...],
    "functions": [first complete function or None, ...]}``.
    """
    prompts = list(prompts)
    names = [None] * len(prompts) if expected_names is None else list(expected_names)
    gates = [greedy_complete(model, tokenizer, p, max_new_tokens, n) for p, n in zip(prompts, names)]
    valid = sum(g.valid for g in gates)
    return {"valid": valid, "total": len(gates), "rate": 100.0 * valid / max(len(gates), 1),
            "completions": [g.text for g in gates], "functions": [g.function for g in gates]}


class ASTValidityHook:
    """The training-loop hook: ``hook(step, loss)`` evaluates the gate and records the curve.

    Args:
        model: the GPT being trained.
        tokenizer: its Tokenizer.
        prompts: held-out prompts.
        expected_names: optional function name per prompt.
        max_new_tokens: token budget per completion.

    ``history`` holds lists ``step``, ``loss``, ``valid``, ``rate`` (percent), ``eval_seconds``;
    ``last`` the latest ``evaluate_ast_gate`` result.
    """

    def __init__(self, model, tokenizer, prompts, expected_names=None, max_new_tokens: int = 200):
        self.model, self.tokenizer = model, tokenizer
        self.prompts, self.expected_names = list(prompts), expected_names
        self.max_new_tokens = int(max_new_tokens)
        self.history = {"step": [], "loss": [], "valid": [], "rate": [], "eval_seconds": []}
        self.last = None

    def __call__(self, step: int, loss: float) -> dict:
        start = time.perf_counter()
        result = evaluate_ast_gate(self.model, self.tokenizer, self.prompts, self.expected_names,
                                   self.max_new_tokens)
        h = self.history
        h["step"].append(int(step))
        h["loss"].append(float(loss))
        h["valid"].append(result["valid"])
        h["rate"].append(result["rate"])
        h["eval_seconds"].append(time.perf_counter() - start)
        self.last = result
        return result


class NextTokenLoss:
    """Cross-entropy over every position: ``loss(logits [B, T, V], targets [B, T])``.

    A ``Trainer`` loss_fn for language models (the package's ``cross_entropy`` wants classes on
    axis 1, so the positions are flattened into the batch first).
    """

    def __call__(self, logits, targets):
        vocab = logits.shape[-1]
        return cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))


def run_ast_gate_training(seconds: float = 60.0, seed: int = 0, eval_every: int = 100, batch_size: int = 16,
                          context: int = 96, embed_dim: int = 64, num_layers: int = 2, num_heads: int = 4,
                          lr: float = 3e-3, max_new_tokens: int = 160, corpus=None, work_dir=None,
                          say=None, budget_clock: str = "cpu") -> dict:
    """Train a small GPT on TinyPy for ``seconds`` of training time with the AST gate in the loop.

    Args:
        seconds: training-time budget (evaluation time is not counted), on ``budget_clock``.
        seed: seed of the model initialisation and the batch order.
        eval_every: optimizer steps between gate evaluations (the loss recorded beside each
            evaluation is the mean training loss of those steps).
        batch_size: windows per batch.
        context: tokens per window (the GPT's max_seq_len).
        embed_dim: GPT width.
        num_layers: GPT blocks.
        num_heads: attention heads.
        lr: AdamW learning rate (constant).
        max_new_tokens: token budget per held-out completion.
        corpus: a TinyPy ``Corpus`` (default ``generate_tinypy(seed)``).
        work_dir: where the shard is written (default a temporary directory, removed after).
        say: optional ``say(str)`` for progress lines.
        budget_clock: ``"cpu"`` (default) counts the process's CPU seconds spent training, so on
            one thread the budget is single-core time even when other work shares the machine;
            ``"wall"`` counts elapsed seconds.

    Returns ``{"step", "loss", "valid", "rate", "eval_seconds"}`` (the curve, one entry per
    evaluation, the first at step 0), plus ``"train_seconds"`` (on the budget clock),
    ``"train_wall_seconds"``, ``"budget_clock"``, ``"total"`` (prompts),
    ``"completions"`` and ``"functions"`` of the last evaluation, ``"corpus_manifest"`` and
    ``"config"``.
    """
    if budget_clock not in ("cpu", "wall"):
        raise ValueError(f"run_ast_gate_training: budget_clock must be 'cpu' or 'wall', got {budget_clock!r}")
    corpus = corpus or generate_tinypy(seed)
    tok = corpus.tokenizer()
    tt_random.manual_seed(seed)
    model = GPT(tok.vocab_size, embed_dim, num_layers, num_heads, max_seq_len=context)
    trainer = Trainer(model, AdamW(model.parameters(), lr=lr, weight_decay=0.01), NextTokenLoss(),
                      grad_clip_norm=1.0, progress=False)
    hook = ASTValidityHook(model, tok, corpus.heldout, corpus.heldout_names, max_new_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(work_dir or tmp, "tinypy.shard")
        pack_tokens(np.asarray(tok.encode(corpus.train)), path, vocab_size=tok.vocab_size, vocabulary=tok)
        shard = TokenShard(path)
        batches = ShardBatcher(shard, batch_size, context, seed=seed, shuffle=True, max_batches=eval_every)
        hook(0, float("nan"))
        trained = wall = 0.0
        clock = time.process_time if budget_clock == "cpu" else time.perf_counter
        while trained < seconds:
            # one training window: epochs (each at most eval_every batches) until eval_every steps
            window_start, losses, weights = trainer.global_step, [], []
            while trainer.global_step - window_start < eval_every and trained < seconds:
                batches.max_batches = min(eval_every - (trainer.global_step - window_start), eval_every)
                start, wall_start = clock(), time.perf_counter()
                before = trainer.global_step
                losses.append(trainer.train_epoch(batches))
                trained += clock() - start
                wall += time.perf_counter() - wall_start
                weights.append(trainer.global_step - before)
            loss = float(np.average(losses, weights=weights))
            hook(trainer.global_step, loss)
            if say:
                say(f"step {trainer.global_step:5d}  {trained:5.1f} s ({budget_clock})  loss {loss:.3f}  "
                    f"AST-valid {hook.last['valid']}/{hook.last['total']}")
        del shard, batches
    out = dict(hook.history)
    out.update(train_seconds=trained, train_wall_seconds=wall, budget_clock=budget_clock,
               total=len(corpus.heldout), completions=hook.last["completions"],
               functions=hook.last["functions"], corpus_manifest=corpus.manifest,
               config=dict(seed=seed, eval_every=eval_every, batch_size=batch_size, context=context,
                           embed_dim=embed_dim, num_layers=num_layers, num_heads=num_heads, lr=lr,
                           max_new_tokens=max_new_tokens, vocab_size=tok.vocab_size))
    return out
