"""The import structure of tinytorch.core: no cycles, no bottom-of-file imports, no patching.

The layering these tests hold in place (a module imports only modules to its left):
  autograd, random, acceleration  <-  ops, activation_ops  <-  tensor  <-  layers  <-  the rest
autograd imports no other core module; it learns the Tensor class through
``register_tensor_class``, which tensor.py applies once, to the class as it is defined.

Each module is imported alone in a fresh interpreter: with a cycle, whichever module of
it is imported first finds the other half-initialised, so trying every module first
exposes any cycle that the usual import order hides. The static checks read the source
with ``ast``, so they also cover import paths no test happens to run.
"""
import ast
import os
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
