"""Closed-world micro-corpora, generated: TinyPy (small Python functions) and TinyTalks (concept Q&A).

Bottleneck it removes: the data a one-minute, single-core training run can use. A downloaded
corpus is too big to saturate in a minute, needs the network, and drifts between versions, so a
result cannot be reproduced. These corpora are generated from a closed set of templates and
word pools: a few tens of kilobytes (each stays under 100 KB, checked), dense in the structure
the model should learn, regenerated bit for bit from a seed (the generator is Python's
``random.Random``, whose algorithm the language keeps stable), and described by a manifest of
sizes and SHA-256 hashes, so a run names exactly the data it saw.

TinyPy: functions built from algorithm templates (sum, count, max, filter, running total, ...)
with names ``<action>_<noun>`` and variables drawn from pools. Every sample is checked with
``ast.parse`` as it is generated. The held-out prompts are function signatures whose names
combine a training action with a noun reserved for held-out use: no held-out name (and no
reserved noun) appears anywhere in the training text, which is checked too.

TinyTalks: "Q: ...\\nA: ..." pairs over a closed set of systems concepts, each asked with
several phrasings; one phrasing per concept is held out (its prompts are "Q: <question>\\nA:").

A ``Corpus`` carries ``train`` (the text), ``heldout`` (prompts), ``heldout_names`` (TinyPy:
the function names a completion must define), ``manifest`` and ``tokenizer()`` (the package's
character ``Tokenizer`` fitted on the train text; held-out prompts use only its characters).

Owns Corpus, generate_tinypy and generate_tinytalks; assumes the core's Tokenizer, and
writes every corpus file atomically (tinytorch._atomic).
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import random

from ..._atomic import replacing, write_file
from ...core.tokenization import Tokenizer

__all__ = ["Corpus", "generate_tinypy", "generate_tinytalks", "MAX_CORPUS_BYTES"]

MAX_CORPUS_BYTES = 100_000
GENERATOR_VERSION = 1


@dataclasses.dataclass
class Corpus:
    """A generated corpus.

    Args:
        name: "tinypy" or "tinytalks".
        seed: the seed it was generated from.
        train: the training text.
        heldout: the held-out prompts (list of str).
        heldout_names: for TinyPy, the function name each held-out prompt defines (else empty).
        manifest: sizes and hashes (see ``make_manifest``).
    """

    name: str
    seed: int
    train: str
    heldout: list
    heldout_names: list
    manifest: dict

    def tokenizer(self) -> Tokenizer:
        """The package's character ``Tokenizer`` fitted on the training text."""
        return Tokenizer(self.train)

    def save(self, folder) -> str:
        """Write ``train.txt``, ``heldout.json`` and ``manifest.json`` into ``folder``; returns it.

        Args:
            folder: the directory (created if missing).
        """
        folder = os.fspath(folder)
        os.makedirs(folder, exist_ok=True)
        with replacing(os.path.join(folder, "train.txt"), text=True, newline="") as f:
            f.write(self.train)
        write_file(os.path.join(folder, "heldout.json"),
                   json.dumps({"prompts": self.heldout, "names": self.heldout_names}, indent=1))
        write_file(os.path.join(folder, "manifest.json"), json.dumps(self.manifest, indent=1, sort_keys=True))
        return folder


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_manifest(name: str, seed: int, train: str, heldout: list, samples: int, templates: list) -> dict:
    """The manifest of a corpus: what regenerating it must reproduce.

    Args:
        name: the corpus name.
        seed: the generator seed.
        train: the training text.
        heldout: the held-out prompts.
        samples: number of training samples (functions or Q&A pairs).
        templates: names of the templates used.
    """
    return {"name": name, "seed": int(seed), "generator_version": GENERATOR_VERSION,
            "train_bytes": len(train.encode("utf-8")), "train_sha256": _sha256(train),
            "train_samples": int(samples), "alphabet_size": len(set(train)),
            "heldout_count": len(heldout), "heldout_sha256": _sha256(json.dumps(heldout)),
            "templates": list(templates)}


def _check_size(name: str, train: str) -> None:
    size = len(train.encode("utf-8"))
    if size >= MAX_CORPUS_BYTES:
        raise ValueError(f"{name}: the corpus came out at {size} bytes, over the {MAX_CORPUS_BYTES} limit")


# ---------------------------------------------------------------------- TinyPy

# template name -> (actions used in function names, signature arguments, body lines).
# Fields: {a} the list argument, {v} loop variable, {acc} accumulator, {res} result list or
# dict, {i} index, {k} a small constant, {op} a comparison.
_TINYPY_TEMPLATES = {
    "sum": (("sum", "total"), "{a}", [
        "{acc} = 0", "for {v} in {a}:", "    {acc} += {v}", "return {acc}"]),
    "count_if": (("count",), "{a}", [
        "{acc} = 0", "for {v} in {a}:", "    if {v} {op} {k}:", "        {acc} += 1", "return {acc}"]),
    "max": (("max", "largest"), "{a}", [
        "{acc} = {a}[0]", "for {v} in {a}:", "    if {v} > {acc}:", "        {acc} = {v}", "return {acc}"]),
    "min": (("min", "smallest"), "{a}", [
        "{acc} = {a}[0]", "for {v} in {a}:", "    if {v} < {acc}:", "        {acc} = {v}", "return {acc}"]),
    "filter": (("keep", "select"), "{a}", [
        "return [{v} for {v} in {a} if {v} {op} {k}]"]),
    "scale": (("scale", "double"), "{a}", [
        "return [{v} * {k} for {v} in {a}]"]),
    "reverse": (("reverse",), "{a}", [
        "{res} = []", "for {v} in {a}:", "    {res}.insert(0, {v})", "return {res}"]),
    "mean": (("mean", "average"), "{a}", [
        "if not {a}:", "    return 0", "return sum({a}) / len({a})"]),
    "find": (("find", "locate"), "{a}, target", [
        "for {i}, {v} in enumerate({a}):", "    if {v} == target:", "        return {i}", "return -1"]),
    "tally": (("tally", "histogram"), "{a}", [
        "{res} = {{}}", "for {v} in {a}:", "    {res}[{v}] = {res}.get({v}, 0) + 1", "return {res}"]),
    "running": (("running", "prefix"), "{a}", [
        "{res} = []", "{acc} = 0", "for {v} in {a}:", "    {acc} += {v}", "    {res}.append({acc})",
        "return {res}"]),
    "is_sorted": (("sorted", "ordered"), "{a}", [
        "for {i} in range(1, len({a})):", "    if {a}[{i} - 1] > {a}[{i}]:", "        return False",
        "return True"]),
    "product": (("product", "multiply"), "{a}", [
        "{acc} = 1", "for {v} in {a}:", "    {acc} *= {v}", "return {acc}"]),
}
_TRAIN_NOUNS = ("values", "scores", "prices", "items", "numbers", "weights", "counts", "sizes",
                "ages", "points", "marks", "totals", "rates", "levels", "speeds", "costs")
# reserved for held-out prompts: never written into the training text
_HELDOUT_NOUNS = ("readings", "votes", "heights", "miles", "grades", "coins", "pixels")
_HELDOUT_ACTIONS = ("total", "count", "largest", "keep", "average", "reverse", "tally")
_ARGS = ("xs", "nums", "data", "vals", "seq", "arr")
_LOOP = ("x", "v", "n", "item", "value", "elem")
_ACC = ("total", "result", "acc", "best", "out", "s")
_RES = ("result", "out", "found", "table", "seen")
_INDEX = ("i", "j", "k", "idx", "pos")
_OPS = (">", "<", ">=", "<=", "==", "!=")
_CONSTS = ("0", "1", "2", "3", "5", "10")


def _tinypy_sample(rng: random.Random, template: str, name: str, arg=None) -> str:
    actions, signature, body = _TINYPY_TEMPLATES[template]
    fields = {"a": arg or rng.choice(_ARGS), "v": rng.choice(_LOOP), "acc": rng.choice(_ACC),
              "res": rng.choice(_RES), "i": rng.choice(_INDEX), "op": rng.choice(_OPS), "k": rng.choice(_CONSTS)}
    if fields["res"] == fields["acc"]:  # the running-total template uses both
        fields["acc"] = "acc" if fields["res"] != "acc" else "total"
    lines = [f"def {name}({signature.format(**fields)}):"] + ["    " + line.format(**fields) for line in body]
    return "\n".join(lines) + "\n"


def _checked_function(source: str, name: str) -> str:
    tree = ast.parse(source)  # a SyntaxError here is a generator bug: let it surface
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].name != name:
        raise AssertionError(f"TinyPy generator produced something other than def {name}: {source!r}")
    return source


def generate_tinypy(seed: int = 0, samples: int = 420) -> Corpus:
    """TinyPy: small Python functions from algorithm templates, plus 7 held-out prompts.

    Args:
        seed: the generator seed; the same seed gives the same bytes.
        samples: number of training functions (each distinct); the text must stay under
            100 KB.
    """
    rng = random.Random(int(seed))
    templates = sorted(_TINYPY_TEMPLATES)
    seen, functions = set(), []
    attempts = 0
    while len(functions) < samples:
        attempts += 1
        if attempts > 50 * samples:
            raise ValueError(f"generate_tinypy: cannot draw {samples} distinct functions from the pools")
        template = rng.choice(templates)
        action = rng.choice(_TINYPY_TEMPLATES[template][0])
        name = f"{action}_{rng.choice(_TRAIN_NOUNS)}"
        source = _tinypy_sample(rng, template, name)
        if source in seen:
            continue
        seen.add(source)
        functions.append(_checked_function(source, name))
    train = "\n".join(functions)
    heldout_names = [f"{a}_{n}" for a, n in zip(_HELDOUT_ACTIONS, _HELDOUT_NOUNS)]
    heldout = [f"def {name}({rng.choice(_ARGS)}):\n" for name in heldout_names]
    for word in heldout_names + list(_HELDOUT_NOUNS):
        if word in train:
            raise AssertionError(f"generate_tinypy: held-out word {word!r} leaked into the training text")
    alphabet = set(train)
    for prompt in heldout:
        if not set(prompt) <= alphabet:
            raise AssertionError(f"generate_tinypy: prompt {prompt!r} uses characters the training text lacks")
    _check_size("generate_tinypy", train)
    manifest = make_manifest("tinypy", seed, train, heldout, len(functions), templates)
    manifest["heldout_names"] = heldout_names
    return Corpus("tinypy", int(seed), train, heldout, heldout_names, manifest)


# ---------------------------------------------------------------------- TinyTalks

# concept -> (what it is, why it matters)
_CONCEPTS = {
    "a tensor": ("an n-dimensional array of numbers with a shape and a dtype",
                 "every layer reads and writes them"),
    "a gradient": ("the derivative of the loss with respect to a parameter",
                   "it tells the optimizer which way to move each weight"),
    "backpropagation": ("the chain rule applied from the loss back through the graph",
                        "it computes every gradient in one backward pass"),
    "a learning rate": ("the step size the optimizer multiplies each gradient by",
                        "too large diverges and too small crawls"),
    "an epoch": ("one full pass over the training data",
                 "it is the unit most schedules count in"),
    "a batch": ("a group of samples processed together in one step",
                "it amortises overhead and averages the gradient noise"),
    "overfitting": ("a model memorising its training data instead of the pattern",
                    "the held-out loss rises while the training loss falls"),
    "attention": ("a weighted sum of values scored by query and key similarity",
                  "it lets each token read any earlier token"),
    "a tokenizer": ("the map from text to integer ids and back",
                    "a model only ever sees the ids"),
    "an embedding": ("a learned vector looked up for each token id",
                     "it turns discrete ids into something a layer can multiply"),
    "a kv cache": ("the stored keys and values of tokens already decoded",
                   "each new token then costs one step instead of the whole prefix"),
    "quantization": ("storing numbers with fewer bits, such as int8 instead of float32",
                     "it cuts memory and bandwidth four times"),
    "a memory map": ("a file mapped into the address space and paged in on demand",
                     "a loader can slice it without reading or copying the file"),
    "a shard": ("one flat binary file holding a slice of the token stream",
                "workers can read it in parallel with no parsing"),
    "loss": ("a number that measures how wrong the predictions are",
             "training is the search for weights that make it small"),
    "dropout": ("randomly zeroing activations during training",
                "it keeps units from relying on each other"),
    "layer norm": ("rescaling each vector to zero mean and unit variance",
                   "it keeps activations in a range the next layer expects"),
    "an optimizer": ("the rule that turns gradients into weight updates",
                     "it decides how fast and how stably training moves"),
    "a checkpoint": ("a saved copy of the weights and the optimizer state",
                     "training can resume after a crash"),
    "gemm": ("a general matrix multiply, the kernel under every dense layer",
             "it is where most of the arithmetic of a model runs"),
}
_WHAT = ("What is {c}?", "Define {c}.", "Explain {c} in one line.", "Tell me what {c} is.",
         "In short, what is {c}?")
_WHY = ("Why does {c} matter?", "Why should I care about {c}?", "What is {c} good for?")


def _capital(s: str) -> str:
    return s[:1].upper() + s[1:]


def generate_tinytalks(seed: int = 0) -> Corpus:
    """TinyTalks: question-and-answer pairs on a closed set of systems concepts.

    Args:
        seed: the generator seed (it picks each concept's held-out phrasing and the order
            of the pairs); the same seed gives the same bytes.
    """
    rng = random.Random(int(seed))
    pairs, heldout = [], []
    for concept in sorted(_CONCEPTS):
        what, why = _CONCEPTS[concept]
        held = rng.choice(_WHAT)
        for q in _WHAT:
            question = _capital(q.format(c=concept))
            answer = f"{_capital(concept)} is {what}."
            if q == held:
                heldout.append(f"Q: {question}\nA:")
            else:
                pairs.append(f"Q: {question}\nA: {answer}\n")
        for q in _WHY:
            pairs.append(f"Q: {_capital(q.format(c=concept))}\nA: Because {why}.\n")
    rng.shuffle(pairs)
    train = "\n".join(pairs)
    for prompt in heldout:
        if prompt + " " in train:
            raise AssertionError(f"generate_tinytalks: held-out question leaked: {prompt!r}")
    _check_size("generate_tinytalks", train)
    manifest = make_manifest("tinytalks", seed, train, heldout, len(pairs), ["what", "why"])
    return Corpus("tinytalks", int(seed), train, heldout, [], manifest)
