"""The `tinytorch` command (also `python -m tinytorch`).

    tinytorch info     the runtime: version, library, ISAs, threads, back ends and why any is missing
    tinytorch demo     a short training run of a small model on the bundled digits data
    tinytorch scorecard [--quick] [--only SECTION] [--out DIR]
                       the extension guide's scorecard tables re-measured on this machine
    tinytorch milestone NAME [--quick]
                       run every milestone whose name contains NAME (shipped with the package;
                       NAME 'list' lists them)
    tinytorch launch -n N [--hostfile F] [--threads K] [--oversubscribe] [--dry-run] script.py [args]
                       run script.py on N MPI ranks (mpirun/mpiexec, the venv's first; one runtime
                       thread per rank unless told otherwise; works as root)

Owns the command line; assumes each command's module (imported when the command runs).
"""
from __future__ import annotations

import argparse
import sys


# One measured figure for the quick run, with its machine (README.md and docs/scorecard.md say the same).
QUICK_HELP = "small sizes: 31 s on a 2-core AMD EPYC with AVX-512, under load (load average 1.2)"


def _table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def cmd_info(args) -> int:
    import platform

    import numpy as np

    from . import __version__, _allocator, backends, get_num_threads, native

    info = native.info()
    rows = [("tinytorch", __version__), ("python", platform.python_version()),
            ("numpy", np.__version__), ("machine", f"{platform.machine()} {platform.system()}")]
    if info["available"] and info.get("isa_active"):
        rows += [("runtime", f"libtinytorch {info['version']} ({info['build_type']}, {info['compiler']})"),
                 ("library", info["library"]),
                 ("ISAs compiled", ", ".join(info["isas_compiled"])),
                 ("ISAs detected", ", ".join(info["isa_detected"])),
                 ("ISA active", info["isa_active"] + (f"  ({info['isa_env_error']})" if info["isa_env_error"] else "")),
                 ("threads", f"{get_num_threads()} of {info['max_threads']} CPUs, from "
                             f"{info.get('threads_source') or 'the default'} (the runtime's own pool)"),
                 ("allocator", _allocator.tuning())]
    else:
        state = "loaded, but its build report is unreadable" if info["available"] else \
            "NOT LOADED: kernels fall back to NumPy"
        rows += [("runtime", state), ("reason", info["reason"])]
    print("TinyTorch\n" + _table(rows))
    print("\nAccelerator back ends")
    brows = []
    for name, (ok, detail) in backends.all_backends().items():
        brows.append((name, ("yes  " if ok else "no   ") + detail))
    print(_table(brows))
    from .distributed import available as mpi_available  # mpi4py is imported lazily, only here
    ok, detail = mpi_available()
    print("\nDistributed (MPI)\n" + _table([("mpi4py", ("yes  " if ok else "no   ") + detail)]))
    fmt = []  # model file formats: optional extras, imported only here
    for mod, what, extra in (("safetensors", "Layer.save/load .safetensors, GPT.from_pretrained", "safetensors"),
                             ("onnx", "tinytorch.export.to_onnx", "onnx"), ("onnxruntime", "serving exported .onnx", "onnx")):
        try:
            __import__(mod)
            fmt.append((mod, "yes  " + what))
        except ImportError:
            fmt.append((mod, f"no   not installed: pip install 'tinytorch[{extra}]'"))
    print("\nModel formats (.npz always)\n" + _table(fmt))
    return 0


def _refuse(command: str, message: str, status: int = 2) -> int:
    """A CLI error: one line on stderr, a non-zero exit status."""
    print(f"tinytorch {command}: {message}", file=sys.stderr)
    return status


def cmd_demo(args) -> int:
    from .demo import run_demo
    if args.epochs < 1:
        return _refuse("demo", f"--epochs must be at least 1, got {args.epochs}")
    return run_demo(epochs=args.epochs, quiet=args.quiet)


def cmd_scorecard(args) -> int:
    from .scorecard import check_output_folder, run_scorecard, section_names
    groups = args.only or []
    only = [n for group in groups for n in group.replace(",", " ").split()]
    if groups and not only:
        return _refuse("scorecard", f"--only needs a section name; choose from {', '.join(section_names())}")
    unknown = [n for n in only if n not in section_names()]
    if unknown:
        return _refuse("scorecard", f"unknown section(s) {unknown}; choose from {', '.join(section_names())}")
    try:
        check_output_folder(args.out)  # before anything is measured
    except ValueError as exc:
        return _refuse("scorecard", f"--out: {exc}")
    command = " ".join(["tinytorch scorecard"] + (["--quick"] if args.quick else [])
                       + [f"--only {n}" for n in only] + ([f"--out {args.out}"] if args.out != "scorecard" else []))
    try:
        results = run_scorecard(quick=args.quick, only=only or None, out=args.out, command=command)
    except OSError as exc:  # the tables were printed; the file could not be written
        return _refuse("scorecard", exc.strerror or str(exc), 1)
    return 1 if any(r.status == "failed" for r in results) else 0


def cmd_milestone(args) -> int:
    from .milestone_runner import run_milestones
    if args.name is None:
        return _refuse("milestone", "NAME is required: a milestone or part of its name ('list' lists them)")
    return run_milestones(args.name, (["--quick"] if args.quick else []) + list(args.script_args))


def cmd_launch(args) -> int:
    from .distributed.launcher import launch  # mpi4py is not needed to start the launcher
    try:
        return launch(args.n, args.script, args.script_args, dry_run=args.dry_run, hostfile=args.hostfile,
                      threads=args.threads, oversubscribe=args.oversubscribe, launcher=args.launcher)
    except (ValueError, FileNotFoundError) as exc:
        return _refuse("launch", str(exc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tinytorch", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="show the runtime, ISAs, threads and back ends").set_defaults(fn=cmd_info)
    demo = sub.add_parser("demo", help="train a small model on the bundled digits data")
    demo.add_argument("--epochs", type=int, default=3, help="epochs to train (at least 1; default 3)")
    demo.add_argument("--quiet", action="store_true")
    demo.set_defaults(fn=cmd_demo)
    card = sub.add_parser("scorecard", help="re-measure the extension guide's scorecard tables on this machine")
    card.add_argument("--quick", action="store_true", help=QUICK_HELP)
    card.add_argument("--only", action="append", metavar="SECTION",
                      help="run only these sections (repeat or comma-separate): lora, checkpoint, loss_scaling, "
                           "fusion, gemm, gelu, attention, offload, scalesim")
    card.add_argument("--out", default="scorecard", help="folder for scorecard.md and the plots (default ./scorecard)")
    card.set_defaults(fn=cmd_scorecard)
    mile = sub.add_parser("milestone", help="run the milestones whose name contains NAME ('list' lists them)",
                          usage="tinytorch milestone [-h] NAME [--quick] [SCRIPT OPTIONS ...]",
                          description="Run every milestone script whose name contains NAME (case-insensitive), "
                                      "in order: '05' runs all of milestone 05, 'lora' one script. The "
                                      "milestones ship with the package; 'tinytorch milestone list' lists them.")
    mile.add_argument("name", metavar="NAME", nargs="?",
                      help="a milestone name or any part of one (every match runs, in order): 04, cnn, lora, "
                           "mlperf, kernels, 05_2017_transformer, ... or 'list'")
    mile.add_argument("--quick", action="store_true", help="the milestone's short mode (under a minute)")
    mile.add_argument("script_args", nargs=argparse.REMAINDER, metavar="SCRIPT OPTIONS",
                      help="further options passed to each script (optional)")
    mile.set_defaults(fn=cmd_milestone)
    launch = sub.add_parser("launch", help="run a script on N MPI ranks (docs/distributed.md)",
                            usage="tinytorch launch [-h] -n N [options] script.py [SCRIPT ARGS ...]")
    launch.add_argument("-n", "--nproc", dest="n", type=int, required=True, help="number of processes")
    launch.add_argument("--hostfile", help="MPI hostfile (one host per line), passed to the launcher")
    launch.add_argument("--threads", type=int, help="runtime threads per process (default: "
                        "TINYTORCH_NUM_THREADS / OMP_NUM_THREADS when set, else 1)")
    launch.add_argument("--oversubscribe", action="store_true", help="allow more ranks than cores (Open MPI)")
    launch.add_argument("--launcher", help="the mpirun/mpiexec to use (default: the venv's, then PATH)")
    launch.add_argument("--dry-run", action="store_true", help="print the launcher command instead of running it")
    launch.add_argument("script", help="the Python script every rank runs")
    launch.add_argument("script_args", nargs=argparse.REMAINDER, metavar="SCRIPT ARGS",
                        help="arguments passed to the script")
    launch.set_defaults(fn=cmd_launch)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
