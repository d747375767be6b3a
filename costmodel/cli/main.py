"""`argmax-tp` / `python -m costmodel` - predict, recommend, sweep, predict-points, validate, profiles, presets.

Plus launchers that hand over to the dashboard and the calibration tools (`dashboard`,
`calibrate-collectives`, `calibrate-kernels`, `verify` need torch - the `calibrate` extra -;
`fit`, `import-nccl-tests` do not). Every user error prints one line `error: <message>` on
stderr and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from ..io import errors
from ..io.errors import InputError, OneLineParser, first_line
from ..io.plain import terminal_text
from ..io.schema_names import DTYPES
from ..profiles.paths import DEFAULT_PROFILE
from ..serving.limits import FIT_PARTS
from .options import (
    ACCEPTANCE,
    INT_FLAG_MAX,
    ITL_MS,
    TEXT,
    Formatter,
    _add_scenario_args,
    add_draft_args,
    add_fabric_args,
    add_placement_args,
    bounded_float,
)
from .output import check_command_outputs
from .simulate_args import add_args as add_simulate_args
from .streamlit_args import check_streamlit_args


def command_module(command: str) -> str:
    """The module that runs a parsed command: costmodel.cli.cmd_<command> (dashes as underscores), each with
    `run(args) -> exit code`. Imported only when its command runs, so `--help` and `profiles` load no model."""
    return f"{__package__}.cmd_{command.replace('-', '_')}"


def run_command(args: argparse.Namespace) -> int:
    check_command_outputs(args)  # never over an input, never a FIFO: refused before any work
    return importlib.import_module(command_module(args.command)).run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="argmax-tp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"argmax-tp {package_version()}")
    sub = parser.add_subparsers(dest="command", parser_class=OneLineParser)  # none given: `no_command`

    p = sub.add_parser("predict", help="price every strategy for one scenario", formatter_class=Formatter)
    _add_scenario_args(p, lists=False)
    p.add_argument("--itl-ms", type=ITL_MS, default=None,
                   help="baseline ITL, ms per decode step, for the impact (needs --acceptance-length)")
    p.add_argument("--acceptance-length", type=ACCEPTANCE, default=None,
                   help="mean tokens emitted per decode step, 1..K+1 (needs --itl-ms)")
    p.add_argument("--max-batch", type=bounded_float(1.0, float(INT_FLAG_MAX["batch"])), default=65536.0,
                   help="upper end of the crossover search, rows")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--explain", action="store_true", help="print every component's formula with numbers")
    p.add_argument("--sensitivity", action="store_true",
                   help="elasticity of the local_argmax_pairs saving to each profile parameter")
    p.add_argument("--no-intervals", action="store_true", help="skip bootstrap intervals (faster)")
    p.add_argument("--verify", action="store_true",
                   help="add target-side greedy verification (B x (K+1) rows over the target vocab) per decode step")
    p.add_argument("--greedy-fraction", type=bounded_float(0.0, 1.0), default=None,
                   help="with --verify: share of decode steps whose requests are all greedy (the rest run the "
                        "baseline); default 1")
    p.add_argument("--target-dtype", default=None, choices=tuple(DTYPES),
                   help="with --verify: the target logits' dtype (default: --dtype)")
    p.add_argument("--matrix-csv", type=TEXT, default=None,
                   help="write the strategy x collective matrix (with each crossover batch) as CSV")
    add_placement_args(p)

    r = sub.add_parser("recommend", formatter_class=Formatter,
                       help="on or off for a workload's batch mix: expected saving, interval, config to paste")
    r.add_argument("--workload", required=True,
                   help="batch distribution: CSV batch,weight | vLLM /metrics scrape(s) | vllm bench serve JSON")
    r.add_argument("--workload-kind", default="auto", choices=("auto", "csv", "vllm-metrics", "vllm-bench"),
                   help="how to read --workload (auto: JSON object = bench, Prometheus text = metrics, else CSV)")
    _add_scenario_args(r, lists=False, batch=False)
    r.add_argument("--itl-ms", type=ITL_MS, default=None,
                   help="baseline ITL at this workload, ms per decode step (needs --acceptance-length)")
    r.add_argument("--acceptance-length", type=ACCEPTANCE, default=None,
                   help="mean tokens emitted per decode step, 1..K+1 (needs --itl-ms)")
    r.add_argument("--method", default=None,
                   help="vLLM speculative method in the pasted config (default: mtp / eagle3 / eagle from the preset)")
    r.add_argument("--verify", action="store_true",
                   help="add target-side greedy verification (B x (K+1) rows over the target vocab) per decode step")
    r.add_argument("--greedy-fraction", type=bounded_float(0.0, 1.0), default=None,
                   help="with --verify: share of decode steps whose requests are all greedy; default 1")
    r.add_argument("--target-dtype", default=None, choices=tuple(DTYPES),
                   help="with --verify: the target logits' dtype (default: --dtype)")
    r.add_argument("--csv", type=TEXT, default=None,
                   help="write the per-batch savings (with the scenario columns) as CSV")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    add_placement_args(r)

    s = sub.add_parser("sweep", help="price a grid of scenarios to a tidy CSV", formatter_class=Formatter)
    _add_scenario_args(s, lists=True)
    s.add_argument("--out", type=TEXT, default=None, help="output path (default stdout)")
    s.add_argument("--format", default="csv", choices=("csv", "parquet"), help="output format")
    add_draft_args(s)

    pp = sub.add_parser("predict-points", help="add predicted_us to measurement rows", formatter_class=Formatter)
    pp.add_argument("--profile", default=DEFAULT_PROFILE, help="bundled profile name or profile JSON path")
    pp.add_argument("--in", dest="input", required=True,
                    help="CSV in the measurement schema (op, mode, world_size, bytes_per_rank, ...)")
    pp.add_argument("--out", type=TEXT, required=True, help="CSV to write: the input rows plus predicted_us")
    pp.add_argument("--engine", default=None,
                    help="vllm | vllm-v2 | sglang | trtllm | tokenspeed: price each row as that engine runs the op "
                         "(captured: graph price; vllm: host launches + GPU through the step model); sets the mode "
                         "column")
    add_fabric_args(pp)
    pp.add_argument("--intervals", action="store_true",
                    help="add predicted_p05_us and predicted_p95_us: the 90%% prediction interval (replicates + "
                         "per-op model discrepancy; costmodel/evidence/discrepancy.py)")

    v = sub.add_parser("validate", help="predict published/measured reference points and report the error",
                       formatter_class=Formatter)
    v.add_argument("--profile", default=None, help="price every row with this profile (default: each row's own)")
    v.add_argument("--reference", nargs="+", default=None, help="reference CSVs (default data/reference/*.csv)")
    v.add_argument("--out", type=TEXT, default=None, help="write the full table as CSV")
    v.add_argument("--max-error", type=bounded_float(0.0, 1e6), default=None,
                   help="exit 1 if any |relative error| exceeds this")
    v.add_argument("--held-out-only", action="store_true", help="apply --max-error to held-out rows only")
    v.add_argument("--no-coverage", action="store_true", help="skip the 90%% interval coverage (faster)")
    v.add_argument("--summary-only", action="store_true", help="print only the per-source summary")
    v.add_argument("--engine-figures", action="store_true",
                   help="price the in-engine figures (data/reference/engine-figures: eager / graph all_reduce loop, "
                        "engine pull requests) with the engine recipes: error, 90%% coverage and target per figure, "
                        "then exit (non-zero when a figure misses its target)")
    v.add_argument("--serving", nargs="*", default=None, metavar="RUN.json",
                   help="the serving replay's error: each vllm bench serve run's own metrics vs the baseline "
                        "strategy's replay, with the server and step model inferred from the run (default: the "
                        "bundled real vLLM runs, data/serving-runs/, and their A/B pairs), then exit")
    v.add_argument("--serving-fit", choices=FIT_PARTS, default="all",
                   help="with --serving: fit each run's step model on all its busy engine steps, or on its first "
                        "half only (the second half held out)")
    v.add_argument("--pairs-out", type=TEXT, default=None,
                   help="with --serving on the bundled runs: write the A/B pairs' table as CSV")

    sm = sub.add_parser("simulate", formatter_class=Formatter,
                        help="replay a vllm bench serve run per strategy: the A/B table, 90%% intervals, detectability")
    _add_scenario_args(sm, lists=False, batch=False)
    add_draft_args(sm)
    add_simulate_args(sm)

    pr = sub.add_parser("profiles", help="list bundled profiles with their provenance")
    pr.add_argument("--json", action="store_true", help="print a JSON list")
    pr.add_argument("--citations", action="store_true", help="print each profile's source and citations")

    cp = sub.add_parser("compare", help="the same scenario on two profiles side by side (savings, crossover)",
                        formatter_class=Formatter)
    cp.add_argument("profile_a", help="bundled profile name or profile JSON path")
    cp.add_argument("profile_b", help="bundled profile name or profile JSON path")
    _add_scenario_args(cp, lists=False)
    cp.add_argument("--max-batch", type=bounded_float(1.0, float(INT_FLAG_MAX["batch"])), default=65536.0,
                    help="upper end of the crossover search, rows")
    cp.add_argument("--csv", type=TEXT, default=None,
                    help="write the long table (profile, strategy, times, savings) as CSV")
    add_draft_args(cp)

    ps = sub.add_parser("presets", help="list model presets (the main columns; --wide: every column)")
    ps.add_argument("--wide", action="store_true", help="print every column of data/presets/models.csv")
    for name, (_, _, text) in LAUNCHERS.items():  # dispatched by main() before parsing; listed for --help
        sub.add_parser(name, help=text, add_help=False)
    return parser


# -- launchers: the dashboard and the calibration tools --------------------------------------------------
# command -> (module run as __main__, needs torch, help). Arguments after the command pass through unchanged.
LAUNCHERS: dict[str, tuple[str, bool, str]] = {
    "dashboard": ("streamlit", False, "start the Streamlit dashboard (arguments go to `streamlit run`)"),
    "calibrate-collectives": ("calibration.bench.collectives", True,
                              "benchmark the collectives (run it under torchrun; needs the calibrate extra)"),
    "calibrate-kernels": ("calibration.bench.kernels", True,
                          "benchmark the non-communication kernels (calibrate extra)"),
    "verify": ("calibration.reference.verify", True,
               "check every strategy against torch.argmax (torchrun; calibrate extra)"),
    "fit": ("calibration.fitting.fit", False, "fit a profile from measurement CSVs (no torch)"),
    "import-nccl-tests": ("calibration.logs.import_nccl_tests", False, "convert nccl-tests logs to measurement CSV"),
    "kernel-report": ("calibration.fitting.kernel_report", False,
                      "achieved bandwidth and fused speed-ups of a kernels CSV"),
}
# the repository's .streamlit/config.toml, for an installed package started from any directory
STREAMLIT_FLAGS = ("--server.maxUploadSize", "20", "--server.fileWatcherType", "none",
                   "--browser.gatherUsageStats", "false",
                   "--client.toolbarMode", "viewer",
                   "--client.showErrorDetails", "none", "--theme.base", "light", "--theme.primaryColor", "#4c78a8")


def app_path() -> Path:
    """app.py: next to the `dashboard` package (the repository root, or site-packages when installed)."""
    spec = importlib.util.find_spec("dashboard")
    if spec is None or spec.origin is None:
        raise InputError("dashboard: the dashboard package is not installed")
    path = Path(spec.origin).resolve().parent.parent / "app.py"
    if not path.is_file():
        raise InputError(f"dashboard: {path} is missing")
    return path


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def package_version() -> str:
    """The installed distribution's version (importlib.metadata), else the checkout's pyproject.toml version."""
    try:
        return importlib.metadata.version("argmax-tp")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        for line in pyproject.read_text().splitlines() if pyproject.is_file() else ():
            if line.startswith("version = "):
                return line.split("=", 1)[1].strip().strip('"') + " (checkout)"
        return "unknown"


def launch(command: str, argv: Sequence[str]) -> int:
    """Run a launcher's module as `__main__` in this process (so torchrun's environment reaches it)."""
    module, needs_torch, _ = LAUNCHERS[command]
    if needs_torch and not _installed("torch"):
        raise InputError(f"{command}: needs torch - install the calibrate extra: pip install 'argmax-tp[calibrate]'")
    if not _installed(module.split(".")[0]):
        raise InputError(f"{command}: module {module} is not installed")
    if command == "dashboard" and any(a in ("-h", "--help") for a in argv):
        print("usage: argmax-tp dashboard [STREAMLIT-RUN-OPTIONS]\n\nstart the Streamlit dashboard on the default "
              "profile (http://localhost:8501); options go to `streamlit run`, e.g. --server.port 8600 "
              "--server.headless true (`streamlit run --help` lists them all)")
        return 0
    if command == "dashboard":
        check_streamlit_args(argv)  # one error line here, not Streamlit's usage block
        sys.argv = ["streamlit", "run", str(app_path()), *STREAMLIT_FLAGS, *argv]
    else:
        sys.argv = [f"argmax-tp {command}", *argv]
    errors.LAUNCHED_AS = f"argmax-tp {command}"  # the tool's usage lines name the command typed
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        errors.LAUNCHED_AS = None
    return 0


def no_command(parser: argparse.ArgumentParser) -> str:
    """The one-line error of a bare `argmax-tp`: what to type, and every command."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return f"no command given (try `argmax-tp --help`; commands: {', '.join(sub.choices)})"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in LAUNCHERS:
            return launch(argv[0], argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            raise InputError(no_command(parser))
        return run_command(args)
    except InputError as exc:
        print(f"error: {terminal_text(exc)}", file=sys.stderr)  # names in the message: no control characters
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:  # e.g. --out in a folder that does not exist
        print(f"error: {terminal_text(first_line(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except (MemoryError, RecursionError):
        print("error: out of memory (the input is too large; see README 'Limits and safety')", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: still one line, never a traceback (tests assert this never happens)
        print(f"error: internal error ({type(exc).__name__}: {first_line(exc)}); please report it", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
