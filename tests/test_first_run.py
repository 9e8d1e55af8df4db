"""What a new user meets on a first run, checked the way they meet it.

  * The README's first command installs what the main job uses (the scorecard extra), the
    README keeps exactly two set-up commands, and the quick run's time is one figure, stated the
    same in the README, docs/scorecard.md and `--help`.
  * `tinytorch scorecard` refuses a bad --only or --out with one line and a non-zero status
    before measuring, prints its tables before it writes scorecard.md (a failed write loses
    nothing), names a missing optional piece in one sentence, and states this machine's
    measured ceilings beside every speed.
  * `tinytorch demo` refuses --epochs < 1 and its header says NumPy when native kernels are off;
    `tinytorch info` prints each op list once.
  * The checkpoint overhead is never an impossible negative figure; log axes read as plain
    numbers; the benchmarks write to a scratch folder unless asked to save; compile_graph names
    `@` in `x @ x.T`.
"""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _cli(*args, env_extra=None, timeout=120):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "tinytorch", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(ROOT))


def _one_line_refusal(run, status=2):
    assert run.returncode == status, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stdout == "", run.stdout[-2000:]


# ---------------------------------------------------------------------------- the README's commands

def _setup_commands():
    section = README.split("## Two commands on a fresh machine", 1)[1].split("\n## ", 1)[0]
    section = section.split("<details>", 1)[0]  # the sample output below is not a command
    return re.findall(r"```\n(.*?)\n```", section, re.S)


def test_readme_first_command_installs_the_scorecard_extra():
    first, second = _setup_commands()  # exactly two set-up commands
    assert first.startswith('python3 -m pip install ".[scorecard]" && tinytorch scorecard --quick'), first
    assert second == "bash tests/run_all.sh"
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        pytest.skip("tomllib needs Python 3.11")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"matplotlib", "threadpoolctl", "tqdm"} <= set(extras["scorecard"])


def test_the_quick_run_time_is_one_figure_everywhere():
    from tinytorch.__main__ import QUICK_HELP
    figure = re.search(r"(\d+ s) on (a [^)]*)", QUICK_HELP)
    assert figure, QUICK_HELP
    seconds, machine = figure.groups()
    docs = (ROOT / "docs" / "scorecard.md").read_text(encoding="utf-8")
    for name, text in (("README.md", README), ("docs/scorecard.md", docs)):
        flat = " ".join(text.split())
        assert f"{seconds} on {machine}" in flat, f"{name} does not state '{seconds} on {machine}'"
        assert "about a minute" not in flat and "under 3 minutes" not in flat, name


def test_readme_names_the_avx512_kernel_path_the_example_prints():
    assert "`sgemm:avx512:narrow`" in README


# ---------------------------------------------------------------------------- scorecard refusals

def test_scorecard_refuses_an_empty_only():
    _one_line_refusal(_cli("scorecard", "--only", ""))
    _one_line_refusal(_cli("scorecard", "--only", ","))


def test_scorecard_refuses_an_unwritable_out_before_measuring(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out in (a_file, a_file / "sub", "/proc/tinytorch-scorecard"):
        run = _cli("scorecard", "--quick", "--only", "loss_scaling", "--out", str(out))
        _one_line_refusal(run)
        assert str(out) in run.stderr and "cannot write the scorecard" in run.stderr


def test_scorecard_prints_its_tables_before_a_failed_write(tmp_path, monkeypatch):
    import tinytorch.scorecard as scorecard

    def refuse(path, text, *a, **k):
        raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(scorecard, "write_file", refuse)
    stream = io.StringIO()
    with pytest.raises(OSError, match="the tables above are this run's results"):
        scorecard.run_scorecard(quick=True, only=["loss_scaling"], out=str(tmp_path), use_tqdm=False,
                                stream=stream)
    assert "== 3. Loss scaling" in stream.getvalue() and "== Summary ==" in stream.getvalue()


def test_scorecard_command_exits_1_with_one_line_when_the_write_fails(tmp_path, monkeypatch, capsys):
    import tinytorch.scorecard as scorecard
    from tinytorch.__main__ import main
    monkeypatch.setattr(scorecard, "write_file",
                        lambda path, text, *a, **k: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    assert main(["scorecard", "--quick", "--only", "loss_scaling", "--out", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "== Summary ==" in captured.out
    refusal = [line for line in captured.err.splitlines() if line.startswith("tinytorch scorecard:")]
    assert len(refusal) == 1 and "could not write" in refusal[0] and "Traceback" not in captured.err


def test_check_output_folder_names_the_problem(tmp_path):
    from tinytorch.scorecard import check_output_folder
    assert check_output_folder(str(tmp_path / "new")) == str(tmp_path / "new") and (tmp_path / "new").is_dir()
    assert not list((tmp_path / "new").iterdir())               # the probe file is gone
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="it is a file, not a folder"):
        check_output_folder(str(tmp_path / "f"))
    with pytest.raises(ValueError, match="empty"):
        check_output_folder("")


# ---------------------------------------------------------------------------- missing pieces, ceilings

def test_a_missing_optional_piece_is_one_sentence(monkeypatch):
    from tinytorch.scorecard import machine
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)     # `import threadpoolctl` now fails
    sentence = machine.missing_sentence()
    assert sentence.count(". ") == 0 and sentence.endswith(".")
    assert "threadpoolctl (NumPy's BLAS could not be held to 1 thread" in sentence
    assert '".[scorecard]"' in sentence
    assert "threadpoolctl is not installed" in machine.blas_description()
    from tinytorch.scorecard.measure import blas_threads_limited
    assert not blas_threads_limited()


def test_ceilings_ratio_text():
    from tinytorch.scorecard.peak import Ceilings, percent_of_peak
    c = Ceilings({1: {"avx512": {"free": 200.0, "pinned": 250.0}}, 2: {"avx512": {"free": 480.0}}}, 40.0)
    assert c.gflops(1) == (250.0, "avx512") and c.gflops(2) == (480.0, "avx512")
    assert c.of_fma(125.0, 1) == "50% of peak" and c.of_fma(300.0, 2) == "62% of peak"
    assert c.of_fma(300.0, 1) == "above the measured peak, which read low"
    assert c.of_copy(30.0) == "75% of copy bandwidth"
    assert Ceilings(reason="no C compiler").of_fma(1.0, 1) == "peak n/a"
    assert percent_of_peak(0.05, 250.0) == "<1%"
    assert any("250 GFLOP/s on 1 thread" in line for line in c.lines())


def test_scorecard_states_the_ceilings_and_each_gemm_speed_against_them(tmp_path):
    from tinytorch.scorecard import run_scorecard
    (res,) = run_scorecard(quick=True, only=["gemm"], out=str(tmp_path), use_tqdm=False, stream=io.StringIO())
    text = (tmp_path / "scorecard.md").read_text()
    assert "measured FMA peak" in text and "measured copy bandwidth" in text
    for claim in res.claims:
        if "GFLOP/s" in claim.measured:
            assert "of peak" in claim.measured or "peak n/a" in claim.measured, claim


# ---------------------------------------------------------------------------- checkpoint overhead, plots

def test_checkpoint_never_reports_a_negative_overhead(monkeypatch, tmp_path):
    from tinytorch.scorecard import checkpoint
    from tinytorch.scorecard.progress import SectionBar
    from tinytorch.scorecard.results import Context

    def fake(L, T, D, repeats):  # the checkpointed step timed faster: noise, which the row must say
        return {"L": L, "segments": round(L ** 0.5), "act_plain": 100.0, "act_ckpt": 10.0, "t_plain": 0.10,
                "t_ckpt": 0.09, "grad_diff": 0.0, "grad_scale": 1.0}
    monkeypatch.setattr(checkpoint, "measure", fake)
    monkeypatch.setattr(checkpoint, "per_block_fit", lambda: np.array([20.0, 8.0]))
    ctx = Context(quick=True, out=str(tmp_path), progress=lambda n, label: SectionBar(n, label, use_tqdm=False),
                  plots_enabled=False)
    res = checkpoint.run(ctx)
    rows = [c for c in res.claims if "compute overhead" in c.row and "(measured" in c.measured]
    assert rows
    for c in rows:
        assert "overhead not measured" in c.measured and not re.search(r"-\d+ %", c.measured), c
        assert c.reproduced is None and "recomputation cannot" in c.why
    assert "noise (< 0)" in "\n".join(res.tables)


def test_log_axes_read_as_plain_numbers():
    pytest.importorskip("matplotlib")
    from tinytorch.scorecard.report import _plain_log_labels, _pyplot
    plt = _pyplot()
    fig, ax = plt.subplots()
    ax.plot([16, 32], [6.2, 81.0])
    ax.set_yscale("log")
    _plain_log_labels(ax.yaxis)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels(minor=False) + ax.get_yticklabels(minor=True)]
    plt.close(fig)
    assert any(labels) and not any("times" in t or "^" in t or "e+" in t for t in labels), labels
    assert "10" in labels


# ---------------------------------------------------------------------------- demo, info

def test_demo_refuses_no_epochs():
    for epochs in ("0", "-1"):
        _one_line_refusal(_cli("demo", "--epochs", epochs))
    from tinytorch.demo import run_demo
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        run_demo(epochs=0)


def test_demo_header_says_numpy_when_native_is_off():
    run = _cli("demo", "--epochs", "1", "--quiet", env_extra={"TINYTORCH_DISABLE_NATIVE": "1"})
    assert run.returncode == 0, run.stderr
    header = run.stdout.splitlines()[0]
    assert "kernels: NumPy (native kernels turned off" in header, header
    assert "matmul path: numpy" in run.stdout


def test_info_prints_each_op_list_once():
    run = _cli("info")
    assert run.returncode == 0, run.stderr
    lists = re.findall(r"\[ops: ([^\]]+)\]", run.stdout)
    long_lists = [ops for ops in lists if ops.count(",") >= 5]
    assert len(long_lists) == len(set(long_lists)), "an op list is printed more than once"
    assert any(ops.startswith("the same as ") for ops in lists)


# ---------------------------------------------------------------------------- benchmarks, fusion

def test_benchmarks_write_to_scratch_unless_saved(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import _common as C
    for argv, where in ((["x"], Path(C.SCRATCH)), (["x", "--save"], Path(C.RESULTS)),
                        (["x", "--out", "/tmp/tt-bench-out"], Path("/tmp/tt-bench-out"))):
        monkeypatch.setattr(sys, "argv", argv)
        args = C.parse(C.arguments("doc", "bench_example.md"))
        assert Path(args.report) == where / "bench_example.md", argv
    assert Path(C.SCRATCH).relative_to(ROOT / "build")          # git-ignored scratch


def test_bench_gemm_labels_the_sizes_it_measured(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_gemm
    assert bench_gemm.size_range([512, 256]) == "256, 512"                # what --quick measures
    assert bench_gemm.size_range([256, 384, 512, 1024, 4096]) == "256..4096"


def test_the_scorecard_folder_of_a_clone_is_ignored():
    done = subprocess.run(["git", "check-ignore", "-q", "scorecard/scorecard.md"], cwd=str(ROOT))
    if done.returncode == 128:
        pytest.skip("not a git checkout")
    assert done.returncode == 0, "./scorecard/ (tinytorch scorecard's default --out) is not git-ignored"
    kept = subprocess.run(["git", "check-ignore", "-q", "benchmarks/results/scorecard/scorecard.md"], cwd=str(ROOT))
    assert kept.returncode == 1, "the committed full scorecard must stay tracked"


def test_compile_graph_names_matmul_in_x_at_x_transposed():
    from tinytorch.extensions import compile_graph
    x = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError, match=r"cannot fuse .*matmul \(@\)"):
        compile_graph(lambda x: x @ x.T, x)
