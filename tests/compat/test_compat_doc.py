"""docs/compat.md is checked, not trusted: every name row imports at upstream's path unless the
doc says it does not, and every constant row is provided (or absent) exactly as the doc says."""
import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat.md"
ROW = re.compile(r"^\| `([^`]+)`[^|]*\| (.*?) \| (same|adapted|different|missing) \| (.*)$")
# the rows the doc says do not import at upstream's path (its Counts section)
NOT_IMPORTABLE = {f"core.autograd.{n}Backward" for n in (
    "Add", "Sub", "Mul", "Div", "Matmul", "Transpose", "Permute", "Embedding", "Slice", "Reshape",
    "Sum", "ReLU", "Sigmoid", "Softmax", "GELU", "MSE", "BCE", "CrossEntropy")} | {"extensions.checkpoint.checkpoint"}


def _rows():
    section, names, constants = None, [], []
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line
            continue
        m = ROW.match(line)
        if not m:
            continue
        if "constants" in section:
            constants.append((m.group(1), re.findall(r"`([A-Z][A-Z0-9_]+)`", m.group(2)), m.group(3)))
        else:
            names.append((m.group(1), m.group(3)))
    return names, constants


NAMES, CONSTANTS = _rows()


def _resolve(dotted):
    path = dotted if dotted.startswith("tinytorch") else "tinytorch." + dotted
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_the_doc_counts_match_its_tables():
    statuses = [s for _, s in NAMES]
    assert len(NAMES) == len({n for n, _ in NAMES}) == 144
    assert (statuses.count("same"), statuses.count("adapted"), statuses.count("different")) == (52, 67, 25)
    provided = sum(len(c) for _, c, s in CONSTANTS if s == "same")
    missing = sum(len(c) for _, c, s in CONSTANTS if s == "missing")
    assert (provided, missing) == (41, 5)


@pytest.mark.parametrize("name, status", NAMES, ids=[n for n, _ in NAMES])
def test_each_name_imports_where_the_doc_says(name, status):
    if name in NOT_IMPORTABLE:
        assert status == "different"
        with pytest.raises((ImportError, AttributeError)):
            _resolve(name)
    else:
        assert _resolve(name) is not None


@pytest.mark.parametrize("module, names, status", CONSTANTS, ids=[f"{m}:{s}" for m, _, s in CONSTANTS])
def test_each_constant_row_is_true(module, names, status):
    mod = importlib.import_module("tinytorch." + module)
    assert names
    for n in names:
        assert hasattr(mod, n) is (status == "same"), f"{module}.{n}"
