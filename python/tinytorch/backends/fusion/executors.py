"""executors: the native executors of a fusion program, the one C-compiler search, and the
compiled-C cache.

Two executors live in the runtime library (runtime/fusion/, ``tt_fusion_*``):

  interp    ``tt_fusion_run``: the tile interpreter; path "fusion:interp:<isa>" (the
            runtime's own report, so it proves the interpreter ran).
  compiled  ``tt_fusion_source`` gives one fused C loop; it is compiled here with the system
            C compiler (``$CC``, else cc, gcc, clang on PATH; ``-std=c11 -O3 -fno-math-errno
            -fno-trapping-math -march=native -fPIC -shared``, dropping -march=native when the
            compiler refuses it; -fno-trapping-math lets GCC turn the selects of the inline
            exp / tanh into blends, without which it leaves the loop scalar on AVX2), cached and
            loaded with ctypes; its rows run on the runtime's threads (tt_fusion_run_rows: the
            generated file starts none); path "fusion:compiled".

The cache: ``$TINYTORCH_CACHE/fusion`` or ``~/.cache/tinytorch/fusion`` (``$XDG_CACHE_HOME``
honoured), a directory of mode 0o700 that must belong to the user. An entry is
``<key>.so`` plus ``<key>.sha256`` (the SHA-256 of the .so), where key = SHA-256 of the
program's words and immediates, the generated source, the compiler's identity (path and
``--version``) and the flags. Files are written to a temporary name in the same directory
with mode 0o600 and moved into place with ``os.replace``, so two processes compiling the
same program both succeed (each loads a complete file). Before loading, the .so is hashed
and compared with its digest; a mismatch (a truncated or tampered file) is rebuilt.

The C source never contains a user string: the runtime emits it from the validated node
list (README "The generated C").

Assumes: the one binding (tinytorch._native); a compiled kernel is loaded once per process
(``forget_loaded`` lets bench_fusion.py time a cache hit).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from ... import _native
from ..._atomic import write_file
from .. import native_enabled

__all__ = ["NativeProgram", "compiler", "compiler_names", "compiler_on_path", "cache_dir",
           "compile_source", "forget_loaded", "BASE_FLAGS", "fusion_library"]

BASE_FLAGS = ("-std=c11", "-O3", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared")
OPTIONAL_FLAGS = ("-march=native",)

_lock = threading.Lock()
_compiler_probe: dict = {}
_loaded: dict = {}          # key -> ctypes function (one load per process)
_has_fusion: dict = {}      # id(library) -> whether it exports tt_fusion_* (asked once)


def fusion_library():
    """(the runtime library or None, reason when None): None when the native path is off,
    the library is missing, or it was built without the tt_fusion_* functions."""
    lib = _native.lib if native_enabled() else None
    if lib is None:
        if not native_enabled():
            return None, "the native path is turned off (use_native(False) or TINYTORCH_DISABLE_NATIVE=1)"
        return None, _native.reason() or "the runtime library is not loaded"
    has = _has_fusion.get(id(lib))
    if has is None or _native.has_fusion is not _has_fusion.get("probe"):
        has = _has_fusion[id(lib)] = _native.has_fusion()
        _has_fusion["probe"] = _native.has_fusion
    if not has:
        return None, (f"the runtime library {_native.library_path()} was built without the "
                      "fusion executor (no tt_fusion_* functions)")
    return lib, ""


class NativeProgram:
    """A validated program held by the runtime (``tt_fusion_create``); freed with the object.

    Args:
        lib: the runtime library (from ``fusion_library``).
        words: the program's int64 words.
        imm: its immediates (float64, one per node).
    """

    def __init__(self, lib, words: np.ndarray, imm: np.ndarray):
        self._lib = lib
        self.handle = None
        words = np.ascontiguousarray(words, dtype=np.int64)
        imm = np.ascontiguousarray(imm, dtype=np.float64)
        out = ctypes.c_void_p()
        status = lib.tt_fusion_create(words.ctypes.data, words.size, imm.ctypes.data if imm.size else None,
                                      imm.size, ctypes.byref(out))
        _native.check(status, "compile_graph: the runtime rejected the fusion program")
        self.handle = out.value

    def source(self) -> str:
        """The generated C source (``tt_fusion_source``)."""
        needed = ctypes.c_int64()
        _native.check(self._lib.tt_fusion_source(self.handle, None, 0, ctypes.byref(needed)),
                          "tt_fusion_source")
        buf = ctypes.create_string_buffer(int(needed.value))
        _native.check(self._lib.tt_fusion_source(self.handle, buf, needed.value, ctypes.byref(needed)),
                          "tt_fusion_source")
        return buf.value.decode()

    def run(self, inputs, input_strides, outputs, output_strides) -> str:
        """Run the interpreter; returns the runtime's path report.

        Args:
            inputs: ctypes array of input data pointers.
            input_strides: ctypes int64 array, R strides (elements) per input.
            outputs: ctypes array of output data pointers.
            output_strides: ctypes int64 array, R strides per output.
        """
        status = self._lib.tt_fusion_run(self.handle, inputs, input_strides, outputs, output_strides)
        _native.check(status, "tt_fusion_run")
        return self._lib.tt_last_kernel_path().decode()

    def __del__(self):
        handle, self.handle = self.handle, None
        if handle is not None:
            try:
                self._lib.tt_fusion_free(handle)
            except Exception:  # noqa: BLE001 - interpreter shutdown: the library may be gone
                pass


def compiler_names() -> list:
    """The C compilers looked for, in order: ``$CC``, then cc, gcc, clang."""
    return [n for n in (os.environ.get("CC", "").strip(), "cc", "gcc", "clang") if n]


def compiler_on_path():
    """The first of ``compiler_names()`` found on PATH, or None: a lookup only (the registry's
    probe uses it; ``compiler()`` also test-compiles)."""
    return next((found for found in map(shutil.which, compiler_names()) if found), None)


def _probe_compiler():
    """(path, identity, flags) of a working C compiler, or (None, reason, ())."""
    tried = []
    for name in compiler_names():
        path = shutil.which(name)
        if path is None:
            tried.append(f"{name}: not on PATH")
            continue
        try:
            version = subprocess.run([path, "--version"], capture_output=True, text=True,
                                     timeout=30).stdout.splitlines()[:1]
        except (OSError, subprocess.SubprocessError) as exc:
            tried.append(f"{name}: {exc}")
            continue
        identity = f"{path} {version[0] if version else ''}"
        with tempfile.TemporaryDirectory(prefix="tt-fusion-probe-") as tmp:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write("#include <math.h>\nint tt_probe(double x) { return (int) sqrt(x); }\n")
            flags = list(BASE_FLAGS) + list(OPTIONAL_FLAGS)
            for drop in ((), OPTIONAL_FLAGS):
                use = [fl for fl in flags if fl not in drop]
                done = subprocess.run([path, *use, "-o", os.path.join(tmp, "probe.so"), src],
                                      capture_output=True, text=True, timeout=120)
                if done.returncode == 0:
                    return path, identity, tuple(use)
            tried.append(f"{name}: cannot build a shared object ({done.stderr.strip()[:200]})")
    return None, "no working C compiler: " + "; ".join(tried), ()


def compiler():
    """(compiler path or None, identity or the reason there is none, flags), probed once."""
    with _lock:
        key = os.environ.get("CC", "") + "|" + os.environ.get("PATH", "")
        if key not in _compiler_probe:
            _compiler_probe[key] = _probe_compiler()
        return _compiler_probe[key]


def forget_loaded() -> None:
    """Forget the kernels this process loaded, so the next ``compile_source`` of a program
    goes to the on-disk cache again (benchmarks/bench_fusion.py times a cache hit this way)."""
    with _lock:
        _loaded.clear()


def cache_dir() -> str:
    """The per-user cache directory (created with mode 0o700; see the module docstring).
    OSError when it exists but belongs to someone else or others may write it."""
    root = os.environ.get("TINYTORCH_CACHE")
    if root:
        path = os.path.join(root, "fusion")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "tinytorch", "fusion")
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.stat(path)
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise OSError(f"fusion cache {path} belongs to another user")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_key(identity: str, words: bytes, source: str, flags) -> str:
    """The cache key of one compiled program.

    Args:
        identity: the compiler's path and version line.
        words: the program's words and immediates, as bytes.
        source: the generated C.
        flags: the compiler flags.
    """
    h = hashlib.sha256()
    for part in (identity.encode(), words, source.encode(), " ".join(flags).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def compile_source(source: str, program_bytes: bytes, stats: dict | None = None):
    """The loaded ``tt_fused_kernel`` of ``source``: from the cache when a verified entry
    exists, else compiled and stored. Returns (function, how) with how one of "loaded"
    (this process had it), "cache-hit", "compiled", "rebuilt" (the cached file failed its
    check). RuntimeError naming the reason when no compiler works or the compile fails.

    Args:
        source: the C text from tt_fusion_source.
        program_bytes: the program's words and immediates (part of the key).
        stats: optional dict whose counters "hits", "misses", "rebuilds" are advanced.
    """
    path, identity, flags = compiler()
    if path is None:
        raise RuntimeError(identity)
    key = cache_key(identity, program_bytes, source, flags)
    with _lock:
        fn = _loaded.get(key)
    if fn is not None:
        return fn, "loaded"
    folder = cache_dir()
    so_path = os.path.join(folder, key + ".so")
    digest_path = os.path.join(folder, key + ".sha256")
    how = "compiled"
    if os.path.exists(so_path) and os.path.exists(digest_path):
        with open(digest_path, "rb") as f:  # bytes: a corrupted digest is rebuilt, not a decode error
            want = f.read().strip()
        if want == _sha256_file(so_path).encode():
            fn = _native.fused_kernel(so_path)
            how = "cache-hit"
        else:
            how = "rebuilt"
    if fn is None:
        with tempfile.TemporaryDirectory(prefix=".build-", dir=folder) as tmp:
            src = os.path.join(tmp, "kernel.c")
            with open(src, "w") as f:
                f.write(source)
            out = os.path.join(tmp, "kernel.so")
            done = subprocess.run([path, *flags, "-o", out, src], capture_output=True, text=True,
                                  timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"the C compiler failed on the generated kernel: "
                                   f"{done.stderr.strip()[:500]}")
            with open(out, "rb") as f:
                data = f.read()
        write_file(so_path, data, mode=0o600)
        write_file(digest_path, (hashlib.sha256(data).hexdigest() + "\n").encode(), mode=0o600)
        # load what was just verified to be ours (another process may have replaced the file
        # with its own identical build meanwhile; the digest check covers that too)
        if _sha256_file(so_path) != hashlib.sha256(data).hexdigest():
            raise RuntimeError(f"fusion cache {so_path} changed while it was written")
        fn = _native.fused_kernel(so_path)
    if stats is not None:
        stats["hits" if how == "cache-hit" else "rebuilds" if how == "rebuilt" else "misses"] += 1
    with _lock:
        _loaded[key] = fn
    return fn, how
