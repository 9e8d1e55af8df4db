"""The import structure of tinytorch: no cycles, floors that only look down, no private names
taken across files, and every source file opening with what it owns and assumes.

Inside tinytorch.core (the first half of this file), a module imports only modules to its left:
  autograd, random, acceleration  <-  ops, activation_ops  <-  tensor  <-  layers  <-  the rest
autograd imports no other core module; it learns the Tensor class through
``register_tensor_class``, which tensor.py applies once, to the class as it is defined.

Each core module is imported alone in a fresh interpreter: with a cycle, whichever module of
it is imported first finds the other half-initialised, so trying every module first
exposes any cycle that the usual import order hides. The static checks read the source
with ``ast``, so they also cover import paths no test happens to run.

The whole package (the second half): the floors of FLOORS, lowest first -- the binding and
the file writers, the back ends behind the kernel door, the core and the measuring helpers,
the extensions and the course's perf tools, the commands. A module imports modules of its own
floor or lower ones, at the top or inside a function alike (backends/ never reaches the core
or an extension; the core never reaches perf/ or extensions/). A package's ``__init__``
importing its own submodules (to re-export or register them) is the package itself, not an
edge between modules. The graph of every module has no cycle. Every ``importlib.import_module``
/ ``__import__`` call is listed in DYNAMIC_IMPORTS with its reason (the static graph cannot see
where it goes). No file takes another file's private name (``from .x import _y`` or
``x._y`` on a module), in the package and in benchmarks/.
"""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "python" / "tinytorch" / "core"
MODULES = sorted(p.stem for p in CORE.glob("*.py") if p.stem != "__init__")

# Imports inside functions, each with the reason it cannot be at the top of its module.
# (module, imported module) -> reason. Empty today: every core import is at the top.
FUNCTION_LEVEL_IMPORTS: dict = {
    # an optional dependency: imported when a .safetensors file is read or written, so the
    # package imports without it and the error names what to install
    ("safetensors_files", "import safetensors"): "optional package",
    ("safetensors_files", "import safetensors.numpy"): "optional package",
    # the package's __init__ imports the core lazily; reading its version at call time keeps
    # core modules importable on their own
    ("safetensors_files", "from .. import __version__"): "package version at call time",
}


def _tree(module: str) -> ast.Module:
    return ast.parse((CORE / f"{module}.py").read_text(), filename=f"{module}.py")


def _core_targets(node, module: str):
    """The core modules an import statement of ``module`` names ("tensor", "ops"...)."""
    if isinstance(node, ast.Import):
        return [a.name.split(".")[2] for a in node.names
                if a.name.startswith("tinytorch.core.") and a.name.count(".") >= 2]
    if isinstance(node, ast.ImportFrom):
        if node.level == 1 and node.module:                 # from .tensor import Tensor
            return [node.module.split(".")[0]]
        if node.level == 1:                                 # from . import random
            return [a.name for a in node.names if a.name in MODULES]
        if node.module and node.module.startswith("tinytorch.core."):
            return [node.module.split(".")[2]]
    return []


def _imports_in_functions(tree):
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    yield fn.name, node


def test_the_module_list_is_the_core():
    assert {"autograd", "ops", "activation_ops", "tensor", "activations", "layers"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_each_core_module_imports_alone_in_a_fresh_interpreter(module):
    done = subprocess.run([sys.executable, "-c", f"import tinytorch.core.{module}"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, f"import tinytorch.core.{module} alone failed:\n{done.stderr}"


def test_core_import_graph_has_no_cycle():
    graph = {m: set() for m in MODULES}
    for m in MODULES:
        for node in ast.walk(_tree(m)):       # function-level imports count too
            graph[m].update(t for t in _core_targets(node, m) if t in graph and t != m)
    state = {}  # module -> "open" while on the DFS path, "done" after

    def visit(m, path):
        state[m] = "open"
        for dep in sorted(graph[m]):
            if state.get(dep) == "open":
                cycle = path[path.index(dep):] + [dep]
                pytest.fail("import cycle in tinytorch.core: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, path + [dep])
        state[m] = "done"

    for m in MODULES:
        if m not in state:
            visit(m, [m])


@pytest.mark.parametrize("module", ["autograd", "ops", "activation_ops"])
def test_the_engine_and_the_ops_do_not_import_tensor(module):
    deps = {t for node in ast.walk(_tree(module)) for t in _core_targets(node, module)}
    allowed = set() if module == "autograd" else {"acceleration", "autograd"}
    assert deps <= allowed, f"{module}.py imports core modules {sorted(deps - allowed)}"


@pytest.mark.parametrize("module", MODULES)
def test_no_import_after_the_first_definition(module):
    seen_definition = None
    for node in _tree(module).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            seen_definition = seen_definition or node.name
        elif seen_definition:
            for inner in ast.walk(node):
                assert not isinstance(inner, (ast.Import, ast.ImportFrom)), (
                    f"{module}.py line {inner.lineno}: a module-level import after "
                    f"'{seen_definition}' is defined (imports belong at the top)")


def test_imports_inside_functions_are_justified():
    found = {(m, ast.unparse(node)): fn for m in MODULES
             for fn, node in _imports_in_functions(_tree(m))}
    unlisted = {k: fn for k, fn in found.items() if k not in FUNCTION_LEVEL_IMPORTS}
    assert not unlisted, ("imports inside functions without a reason in FUNCTION_LEVEL_IMPORTS "
                          f"(move them to the top of the module): {unlisted}")
    stale = set(FUNCTION_LEVEL_IMPORTS) - set(found)
    assert not stale, f"FUNCTION_LEVEL_IMPORTS lists imports that no longer exist: {stale}"


@pytest.mark.parametrize("module", MODULES)
def test_no_module_patches_another_modules_attributes(module):
    """No ``other_module.name = value`` or ``setattr(other_module, ...)`` at module level."""
    tree = _tree(module)
    aliases = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            aliases.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            aliases.update(a.asname or a.name for a in node.names if a.name[:1].islower())
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            assert not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                        and t.value.id in aliases), \
                f"{module}.py line {node.lineno}: assigns {ast.unparse(t)} in another module"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # code that runs later, not at import
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "setattr":
                pytest.fail(f"{module}.py line {inner.lineno}: setattr at module level")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _core_modules_loaded_by(code: str) -> set:
    """The tinytorch.core modules a fresh interpreter has loaded after running ``code``."""
    listing = "\nimport sys; print(' '.join(m for m in sys.modules if m.startswith('tinytorch.core.')))"
    return {m.rsplit(".", 1)[1] for m in _run(code + listing).split()}


def test_importing_autograd_loads_no_tensor():
    loaded = _core_modules_loaded_by("import tinytorch.core.autograd")
    assert loaded == {"autograd"}, loaded


def test_tensor_activation_methods_need_neither_layers_nor_activations():
    loaded = _core_modules_loaded_by(
        "from tinytorch.core.tensor import Tensor\n"
        "t = Tensor([[0.5, -1.0]], requires_grad=True)\n"
        "(t.relu() + t.sigmoid() + t.tanh() + t.softmax() + t.log_softmax(axis=0)).sum().backward()")
    assert not loaded & {"layers", "activations"}, loaded


def test_public_paths_stay():
    out = _run("from tinytorch.core.tensor import Tensor, Function, no_grad, gradcheck\n"
               "from tinytorch.core import autograd, ops\n"
               "assert Function is autograd.Function and no_grad is autograd.no_grad\n"
               "assert gradcheck is autograd.gradcheck\n"
               "assert Tensor(1.0).astype('float64').grad_fn is None\n"
               "t = Tensor([1.0], requires_grad=True)\n"
               "assert type((t * 2).grad_fn) is ops.Mul and type(t.half().grad_fn) is ops.Cast\n"
               "print('ok')")
    assert out == "ok"


def test_a_function_applied_before_tensor_is_imported_says_what_is_missing():
    code = ("import numpy as np\nfrom tinytorch.core.autograd import Function\n"
            "class Twice(Function):\n"
            "    def forward(self, x): return 2 * x\n"
            "try:\n    Twice.apply(np.ones(2))\nexcept RuntimeError as e:\n    print(e)\n")
    assert "import tinytorch.core.tensor" in _run(code)


# ======================================================================================
# The whole package
# ======================================================================================

PACKAGE = CORE.parent
BENCHMARKS = PACKAGE.parents[1] / "benchmarks"

# The floors, lowest first: a module may import modules of its own floor or of lower floors.
# A top-level part of the package (a subpackage or a module) not named here fails the test, so
# whoever adds one says where it stands.
FLOORS = [
    {"_native", "_atomic", "_allocator"},                 # the ctypes binding, atomic files, allocator
    {"backends", "native"},                               # the registry, every back end; runtime info
    {"core", "measure"},                                  # tensors and autograd; clocks, threads, machine
    {"extensions", "perf", "compat", "distributed", "export", "_export_layers", "data", "models",
     "text"},                                             # what users add on top of the core
    {"scorecard", "olympics", "demo", "milestone_runner", "__main__"},   # commands and reports
]

# Imports of the package itself (``tinytorch``, whose __init__ is a lazy facade: it loads a part
# on first attribute access), from below the top floor. module -> reason.
FACADE_IMPORTS = {
    "tinytorch.core.safetensors_files": "the package version at call time (from .. import __version__)",
    "tinytorch.measure.threads": "Threads reads and sets the runtime's thread count through "
                                 "tinytorch.get_num_threads / set_num_threads when entered",
    "tinytorch.measure.machine": "describe() reads tinytorch.get_num_threads()",
}

# Every importlib.import_module / __import__ call: (module, the call's source) -> reason.
DYNAMIC_IMPORTS = {
    ("tinytorch", "importlib.import_module(_LAZY_MODULES[name])"):
        "the facade's lazy submodules (tinytorch.olympics on first access)",
    ("tinytorch", "importlib.import_module(module)"):
        "the facade's lazy names (tinytorch.Tensor, ... loaded on first access)",
    ("tinytorch.__main__", "__import__(mod)"):
        "`tinytorch info` asks whether optional packages (safetensors, onnx) are installed",
    ("tinytorch.scorecard", "importlib.import_module(f'{__name__}.{self.name}')"):
        "a scorecard section's module, imported when the section runs",
    ("tinytorch.scorecard.machine", "__import__(name)"):
        "whether a scorecard extra (matplotlib, threadpoolctl, tqdm) is importable",
    ("tinytorch.measure.memory", "importlib.import_module('tinytorch.native')"):
        "the runtime's memory counters at call time (None without the library); tests stand in "
        "a fake runtime here",
}

# Private names taken across files that are still to be made public: (importing file, name) ->
# reason. Keep it empty; an entry that no longer matches fails the test.
PRIVATE_IMPORTS_PENDING: dict = {}


def _module_files() -> dict:
    """{dotted module name: path} of every Python file of the package."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


FILES = _module_files()


def _is_package(module: str) -> bool:
    return FILES[module].name == "__init__.py"


def _nearest_module(name: str) -> str | None:
    while name and name not in FILES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node) -> list:
    """[(target module, imported name or None)] of an import statement of ``module``: the module
    each name comes from (a submodule when the name is one)."""
    if isinstance(node, ast.Import):
        return [(_nearest_module(a.name), None) for a in node.names if a.name.split(".")[0] == "tinytorch"]
    if node.level:
        base = module if _is_package(module) else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        source = base + ("." + node.module if node.module else "")
    elif (node.module or "").split(".")[0] == "tinytorch":
        source = node.module
    else:
        return []
    out = []
    for a in node.names:
        if source + "." + a.name in FILES:
            out.append((source + "." + a.name, None))
        else:
            out.append((_nearest_module(source), a.name))
    return out


def _parsed(path):
    return ast.parse(path.read_text(), filename=str(path))


def _package_graph() -> dict:
    graph = {m: set() for m in FILES}
    for m, path in FILES.items():
        for node in ast.walk(_parsed(path)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target, _ in _targets(m, node):
                    if target is None or target == m:
                        continue
                    if _is_package(m) and target.startswith(m + "."):
                        continue  # a package importing its own submodules
                    graph[m].add(target)
    return graph


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _floor(module: str) -> int:
    part = _part(module)
    for i, floor in enumerate(FLOORS):
        if part in floor:
            return i
    pytest.fail(f"{module}: the top-level part {part!r} has no floor in FLOORS (add it where it stands)")


def test_every_part_of_the_package_has_a_floor():
    for m in FILES:
        if m != "tinytorch":
            _floor(m)


def test_package_import_graph_has_no_cycle():
    graph = _package_graph()
    state = {}

    def visit(m, path):
        state[m] = "open"
        for dep in sorted(graph[m]):
            if state.get(dep) == "open":
                pytest.fail("import cycle in tinytorch: " + " -> ".join(path[path.index(dep):] + [dep]))
            if dep not in state:
                visit(dep, path + [dep])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_lower_floors_never_import_higher_ones():
    graph = _package_graph()
    upward, facade = [], set()
    for m, deps in graph.items():
        if m == "tinytorch":
            continue
        for dep in deps:
            if dep == "tinytorch":
                if _floor(m) < len(FLOORS) - 1:
                    facade.add(m)
            elif _floor(dep) > _floor(m):
                upward.append(f"{m} (floor {_floor(m)}) imports {dep} (floor {_floor(dep)})")
    assert not upward, "imports that reach a higher floor:\n" + "\n".join(sorted(upward))
    assert facade == set(FACADE_IMPORTS), (
        f"imports of the tinytorch facade below the top floor without a reason: {sorted(facade - set(FACADE_IMPORTS))}; "
        f"listed but gone: {sorted(set(FACADE_IMPORTS) - facade)}")


@pytest.mark.parametrize("module", ["tinytorch.backends", "tinytorch.backends.cpu", "tinytorch.backends.fusion",
                                    "tinytorch.backends.triton", "tinytorch.backends.reference"])
def test_no_back_end_imports_the_core_or_an_extension(module):
    deps = {d for m, ds in _package_graph().items() if m == module or m.startswith(module + ".") for d in ds}
    assert not {d for d in deps if _part(d) in ("core", "extensions")}, sorted(deps)


def _dynamic_imports(module: str, path) -> set:
    found = set()
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Call):
            fn = ast.unparse(node.func)
            if fn in ("importlib.import_module", "__import__", "import_module"):
                found.add((module, ast.unparse(node).replace('"', "'")))
    return found


def test_every_dynamic_import_is_counted_with_its_reason():
    found = set().union(*(_dynamic_imports(m, p) for m, p in FILES.items()))
    assert found - set(DYNAMIC_IMPORTS) == set(), (
        f"import_module / __import__ calls without a reason in DYNAMIC_IMPORTS: {sorted(found - set(DYNAMIC_IMPORTS))}")
    assert set(DYNAMIC_IMPORTS) - found == set(), f"listed but gone: {sorted(set(DYNAMIC_IMPORTS) - found)}"


def _private_names_taken(module: str, path, resolve) -> set:
    """{(module, "source.name")} for every private name ``module`` takes from another file:
    ``from x import _y`` and ``x._y`` where ``x`` is a module it imported."""
    taken, module_aliases = set(), {}
    tree = _parsed(path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias, (target, name) in zip(node.names, resolve(module, node)):
                if target is None:
                    continue
                if name is None:
                    bound = alias.asname or (alias.name.split(".")[0] if isinstance(node, ast.Import) else alias.name)
                    module_aliases[bound] = target if alias.asname or not isinstance(node, ast.Import) else None
                elif name.startswith("_") and not name.startswith("__") and target != module:
                    taken.add((module, f"{target}.{name}"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in module_aliases and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            target = module_aliases[node.value.id] or node.value.id
            taken.add((module, f"{target}.{node.attr}"))
    return taken


def _script_targets(module: str, node):
    """_targets for a benchmark script: the package's modules, and the scripts beside it."""
    if isinstance(node, ast.Import):
        out = []
        for a in node.names:
            if a.name.split(".")[0] == "tinytorch":
                out.append((_nearest_module(a.name), None))
            else:
                out.append((a.name if (BENCHMARKS / f"{a.name}.py").exists() else None, None))
        return out
    if (node.module or "").split(".")[0] == "tinytorch":
        return _targets(module, node)
    local = node.module if node.module and (BENCHMARKS / f"{node.module}.py").exists() else None
    return [(local, a.name) for a in node.names]


def test_no_file_takes_another_files_private_name():
    taken = set()
    for m, path in FILES.items():
        taken |= _private_names_taken(m, path, _targets)
    for path in sorted(BENCHMARKS.glob("*.py")):
        taken |= _private_names_taken(path.stem, path, _script_targets)
    taken = {(m, name) for m, name in taken if not name.startswith(m + "._")}
    unlisted = taken - set(PRIVATE_IMPORTS_PENDING)
    assert not unlisted, ("private names taken across files (make the name public and documented, or "
                          "give the caller a supported hook):\n" + "\n".join(f"{m}: {n}" for m, n in sorted(unlisted)))
    stale = set(PRIVATE_IMPORTS_PENDING) - taken
    assert not stale, f"PRIVATE_IMPORTS_PENDING lists imports that no longer exist: {stale}"


@pytest.mark.parametrize("package", ["tinytorch.backends", "tinytorch.perf", "tinytorch.extensions",
                                     "tinytorch.scorecard", "tinytorch.measure"])
def test_each_package_imports_alone_in_a_fresh_interpreter(package):
    done = subprocess.run([sys.executable, "-c", f"import {package}"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, f"import {package} alone failed:\n{done.stderr}"


def test_the_measuring_floor_loads_neither_perf_nor_the_scorecard():
    listing = ("import tinytorch.measure, sys\n"
               "print(' '.join(m for m in sys.modules if m.startswith(('tinytorch.perf', 'tinytorch.scorecard', "
               "'tinytorch.extensions'))))")
    assert _run(listing) == ""


# ======================================================================================
# Every source file opens with its design: what it owns and what it assumes
# ======================================================================================

# Files whose opening docstring does not yet say both (in the words "owns" and "assumes");
# every other file, and every new one, must. The list only shrinks: a file that gains the two
# statements fails the test until it is taken off.
DESIGN_DOCSTRING_PENDING: frozenset = frozenset()  # empty: every file says both


def _design_docstring(path) -> str:
    tree = _parsed(path)
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return ""
    return first.value.value


@pytest.mark.parametrize("module", sorted(FILES))
def test_every_source_file_opens_with_its_design(module):
    path = FILES[module]
    rel = path.relative_to(PACKAGE).as_posix()
    doc = _design_docstring(path)
    lines = [line for line in doc.splitlines() if line.strip()]
    assert len(lines) >= 2, f"{rel}: opens without a design docstring (a summary line, then what it owns and assumes)"
    says_both = bool(re.search(r"\bown", doc, re.I) and re.search(r"\bassum", doc, re.I))
    if rel in DESIGN_DOCSTRING_PENDING:
        assert not says_both, f"{rel} now says what it owns and assumes: take it off DESIGN_DOCSTRING_PENDING"
    else:
        assert says_both, f"{rel}: the opening docstring must say what the file owns and what it assumes"


def test_the_pending_design_list_names_existing_files():
    gone = {p for p in DESIGN_DOCSTRING_PENDING if not (PACKAGE / p).exists()}
    assert not gone, f"DESIGN_DOCSTRING_PENDING names files that no longer exist: {sorted(gone)}"
