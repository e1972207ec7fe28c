"""The ``planner`` command: parse, call the library, map errors to exit codes."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from planner.errors import ExitCode, InputError, InputProblem, SolverError
from planner.paths import PHILLY_CSV, PHILLY_SCENARIO, SAMPLE

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console
    from rich.status import Status

    from planner.config import ModelConfig
    from planner.inputs import Scenario

# Everything else is imported by the command that needs it, so that `planner --help` and
# a mistyped option answer at once instead of after pandas, OR-Tools and the solvers load.


class Parser(argparse.ArgumentParser):
    """argparse that, on an unknown option or subcommand, names the closest one (exit 2).

    Python 3.11's argparse has no ``suggest_on_error``; this adds it with :mod:`difflib`.
    """

    argv: list[str] | None = None  # what is being parsed, to find the subcommand's options

    def error(self, message: str) -> None:  # type: ignore[override]
        """Print usage, the error and a "did you mean" hint; exit 2."""
        hint = suggestion(self, message, self.argv)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}{hint}\n")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings if o.startswith("--")]


def suggestion(parser: argparse.ArgumentParser, message: str, argv: list[str] | None) -> str:
    """``"; did you mean --out?"`` for the closest known choice or option, else ``""``."""
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        known = re.findall(r"'([^']*)'", choice.group(2))
        close = difflib.get_close_matches(choice.group(1), known, n=1, cutoff=0.5)
        return f"; did you mean {close[0]!r}?" if close else ""
    unknown = re.search(r"unrecognized arguments: (.*)", message)
    if not unknown:
        return ""
    # the options of the (sub)command being parsed: walk argv down the subcommands
    scope = parser
    for token in argv or []:
        inner = _subparsers(scope)
        if token in inner:
            scope = inner[token]
    known = _options(scope)
    words = list(argv or [])
    literal = set(words[words.index("--") + 1:]) if "--" in words else set()
    hints = []
    for token in unknown.group(1).split():
        if token in literal:  # after --, no word is an option: suggesting one misleads
            hints.append(f"{token!r} follows --, so it is an argument, not an option, and "
                         "this command takes no more arguments")
        elif token.startswith("-"):
            name = token.split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
            if close and close[0] != name:
                hints.append(f"did you mean {close[0]} (not {name})?")
    return "; " + " ".join(hints) if hints else ""


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="planner", description=(
        "Plan GPU-hours and whole-node reservations for projects, to budgets and "
        "strategic weights, under capacity."))
    parser.add_argument("--version", action="version", version=f"planner {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="plan a scenario and write DIR/plan.json and a summary")
    run.add_argument("scenario", nargs="?", default=str(SAMPLE),
                     help="scenario folder or .xlsx workbook (default: the bundled sample)")
    run.add_argument("--out", default="out", help="output folder (default: ./out)")
    run.add_argument("--as-of", dest="as_of", help="plan from this date (overrides the scenario)")
    run.add_argument("--previous", help="the previous plan.json (keeps running reservations)")
    run.add_argument("--model", default="default",
                     help="planning model: a name in models/ or a .toml path (default: default)")
    run.add_argument("--time-limit", dest="time_limit", type=float,
                     help="seconds for the whole solve (overrides the model)")
    run.add_argument("--mip-gap", dest="mip_gap", type=float,
                     help="relative gap to stop reservation placement at (overrides the model)")
    run.add_argument("--limits", choices=("time", "work"),
                     help="what stops the solve: time (--time-limit, shared as the machine's "
                          "load allows; the default of run) or work (counts of nodes, rounds "
                          "and moves: the same plan whatever the load); overrides the model's "
                          "solver.limits")
    run.add_argument("--quiet", action="store_true", help="no progress, no summary")
    run.add_argument("--export", help="also export the first period to these targets, "
                                      "comma-separated (kueue,slurm,json), into DIR/<target>/")
    run.add_argument("--solver", help="solver of the LP/MIP stages: highs (default) or any "
                                      "PuLP reaches here (cbc, gurobi, cplex, …; pip install "
                                      "'gpu-planner[solvers]'); reservations are always "
                                      "placed by HiGHS")
    run.add_argument("--write-model", dest="write_model", metavar="DIR",
                     help="also write the elastic LP as DIR/elastic.mps, .lp and "
                          "-names.csv (see docs/explanation/model.md)")
    validate = sub.add_parser("validate", help="check a scenario's inputs; change nothing")
    validate.add_argument("scenario", help="scenario folder or .xlsx workbook")
    validate.add_argument("--for", dest="targets", metavar="TARGETS",
                          help="also refuse ids these executors cannot carry, comma-separated "
                               "(kueue,slurm,json; e.g. clusters that are not Slurm "
                               "partition names)")
    check = sub.add_parser("check", help="check a plan against its scenario's hard rules")
    check.add_argument("plan", help="plan.json")
    check.add_argument("scenario", nargs="?", default=str(SAMPLE),
                       help="the scenario it was planned from (default: the bundled sample)")
    check.add_argument("--previous", help="the plan it replanned (for rule 6)")
    export = sub.add_parser("export", help="turn a plan into Kueue manifests, a Slurm script "
                                           "or the executor view")
    export.add_argument("plan", help="plan.json")
    export.add_argument("--to", required=True, choices=("kueue", "slurm", "json"),
                        help="target executor")
    export.add_argument("--out", required=True, help="output folder")
    export.add_argument("--periods", type=int, default=1,
                        help="Kueue: how many periods from the first to export (default 1)")
    export.add_argument("--scenario", default=str(SAMPLE),
                        help="the scenario the plan was made from, for its org tree "
                             "(default: the bundled sample)")
    export.add_argument("--previous",
                        help="Slurm: the plan this one replans; emit only what changed")
    export.add_argument("--per-cluster", dest="per_cluster", action="store_true",
                        default=None,
                        help="Kueue: a manifest set per cluster, kueue-<period>-<cluster>.yaml "
                             "(automatic above 64 clusters)")
    export.add_argument("--workloads", metavar="FILE",
                        help="Kueue: `kubectl get workloads -A -o json`; the first period's "
                             "nominal quotas widen to the gangs pending in it (rule 6)")
    export.add_argument("--late", metavar="SET.yaml",
                        help="Kueue, hourly between cycles: the manifest set in force "
                             "(kueue-<period>.yaml); the queues the plan gave no quota on "
                             "a cluster get their pending gangs' GPUs from the pool "
                             "(rule 7), written to --out under the same name; needs "
                             "--workloads")
    report = sub.add_parser("report", help="leadership's quarterly report: .xlsx or .html")
    report.add_argument("scenario", nargs="?", default=str(SAMPLE),
                        help="scenario folder or .xlsx workbook (default: the bundled sample)")
    report.add_argument("--plan", help="plan.json to report on (default: plan the scenario now)")
    report.add_argument("--model",
                        help="planning model for a fresh plan (default: default), or the "
                             "lookback to explain --plan with (default: the plan's model)")
    report.add_argument("--out", required=True, help="FILE.xlsx or FILE.html")
    simulate = sub.add_parser("simulate", help="replay a job trace under scheduling policies "
                                               "and compare what they deliver")
    simulate.add_argument("scenario", nargs="?", default=None,
                          help="scenario folder or .xlsx workbook (default: data/philly if "
                               "present, else the bundled sample)")
    simulate.add_argument("--trace", required=True, help="the trace CSV")
    simulate.add_argument("--policy", default=None,
                          help="comma-separated policies (default: all seven: priority, "
                               "fairtree, quota, lookback, planner, planner-kueue, "
                               "planner-slurm)")
    simulate.add_argument("--out", required=True, help="output folder")
    simulate.add_argument("--seeds", default=None,
                          help="comma-separated HiGHS random seeds, e.g. 0,1,2: each planning "
                               "policy is replayed once per seed, as columns NAME@seedK (the "
                               "spread is how firm a figure is; default: the model's seed, "
                               "one column)")
    simulate.add_argument("--model", default="default",
                          help="planning model of the planner policy: a name in models/ or a "
                               ".toml path (default: default); its min_runtime_cap_hours caps "
                               "every policy's protected runtimes")
    simulate.add_argument("--start", default=None,
                          help="replay only from this whole hour (UTC, e.g. "
                               "2026-11-02T00:00:00): the window [--start, --end) is replayed "
                               "as a quarter of its own, the jobs submitted in it, each budget "
                               "its share of the window's hours (default: quarter start)")
    simulate.add_argument("--end", default=None,
                          help="replay only to this whole hour (UTC), exclusive; see --start "
                               "(default: quarter end)")
    simulate.add_argument("--result", metavar="FILE.json",
                          help="also write the figures as a result file (benchmarks/results/"
                               "NAME.json: date, machine, commit and command recorded), "
                               "which the docs' Results pages render")
    trace = sub.add_parser("trace", help="make job traces to replay (planner simulate)")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True)
    philly = trace_sub.add_parser("philly", help="convert the Philly trace onto a scenario")
    philly.add_argument("scenario", nargs="?", default=str(PHILLY_SCENARIO),
                        help="scenario to replay on (default: the bundled data/philly)")
    philly.add_argument("--in", dest="source", metavar="PHILLY.csv",
                        required=not PHILLY_CSV.is_file(),
                        default=str(PHILLY_CSV) if PHILLY_CSV.is_file() else None,
                        help=f"Philly CSV (default: {PHILLY_CSV}, when it exists)")
    philly.add_argument("--out", required=True, metavar="TRACE.csv", help="trace CSV to write")
    synthetic = trace_sub.add_parser("synthetic", help="a seeded synthetic quarter on a scenario "
                                                       "(wide gangs, day and week rhythm)")
    synthetic.add_argument("scenario", nargs="?", default=str(SAMPLE),
                           help="scenario to replay on (default: the bundled sample)")
    synthetic.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    # defaults: planner.simulate.synthetic.SyntheticParams (not imported for --help)
    synthetic.add_argument("--jobs", type=int, default=None,
                           help="number of jobs (default 40,000)")
    synthetic.add_argument("--load", type=float, default=None,
                           help="offered GPU-hours ÷ capacity over the quarter (default 1.45)")
    synthetic.add_argument("--out", required=True, metavar="TRACE.csv",
                           help="trace CSV to write")
    ingest = sub.add_parser("ingest", help="append what ran (sacct or Kueue Workloads) to a "
                                           "scenario's usage.csv, once per job; derive its "
                                           "demand.csv from the queue (squeue, or Kueue "
                                           "Workloads with --demand)")
    ingest.add_argument("source", choices=("sacct", "kueue", "squeue"),
                        help="sacct: `sacct --parsable2 --noheader --allocations "
                             "--format=JobIDRaw,Account,Partition,AllocTRES,Start,End,State,QOS`; "
                             "kueue: `kubectl get workloads -A -o json`; squeue: `squeue "
                             "--noheader --array --states=PD,R --Format=...` (the fields in "
                             "docs/how-to/demand-from-the-queue.md), demand.csv only")
    ingest.add_argument("file", help="the saved output")
    ingest.add_argument("scenario", nargs="?", default=str(SAMPLE),
                        help="scenario folder whose usage.csv (and demand.csv) to update "
                             "(default: the bundled sample)")
    ingest.add_argument("--now", help="when the file was saved: jobs still running end here "
                                      "(usage), demand rows start here (default: the current "
                                      "UTC time)")
    ingest.add_argument("--dry-run", dest="dry_run", action="store_true",
                        help="report what would change; write nothing")
    ingest.add_argument("--demand", action="store_true",
                        help="kueue: also rewrite demand.csv from the pending and admitted "
                             "Workloads (after the usage ingest); squeue always does")
    ingest.add_argument("--state", metavar="DIR",
                        help="squeue: the planning state folder, whose tick.json names the "
                             "jobs planner tick moved off their budget QOS, to "
                             "gp-opportunistic or gp-overdrawn (still their project's demand)")
    ingest.add_argument("--no-forecast", dest="forecast", action="store_false",
                        help="demand: leave out the arrival forecast from usage.csv")
    explain = sub.add_parser("explain", help="why a project or team gets what it gets")
    explain.add_argument("node", metavar="PROJECT|TEAM", help="a project or team id")
    explain.add_argument("--scenario", default=str(SAMPLE),
                         help="scenario folder or .xlsx workbook (default: the bundled sample)")
    _plan_options(explain)
    explain.add_argument("--period", help="a time inside the period to explain "
                                          "(default: the plan's first period)")
    status = sub.add_parser("status", help="the plan in force: granted, running vs. entitled, "
                                           "forecast and risks per project")
    status.add_argument("scenario", nargs="?", default=str(SAMPLE),
                        help="scenario folder or .xlsx workbook (default: the bundled sample)")
    _plan_options(status)
    cycle = sub.add_parser("cycle", help="one planning cycle: ingest, plan from the last plan, "
                                         "export, apply.sh; history in --state DIR")
    cycle.add_argument("scenario", help="scenario folder (its usage.csv takes the ingest)")
    cycle.add_argument("--state", required=True,
                       help="state folder: DIR/plans/<as_of>/ per cycle, DIR/current the plan "
                            "in force")
    cycle.add_argument("--as-of", dest="as_of",
                       help="plan from this time (default: now, floored to the period grid)")
    cycle.add_argument("--sacct", help="sacct output to ingest first (planner ingest sacct)")
    queues = cycle.add_mutually_exclusive_group()
    queues.add_argument("--kueue", help="Kueue Workloads JSON to ingest first: usage, and "
                                        "demand.csv from the queue (planner ingest kueue "
                                        "--demand)")
    queues.add_argument("--squeue", help="squeue output whose jobs become demand.csv first "
                                         "(planner ingest squeue); with --sacct for usage")
    cycle.add_argument("--export", help="targets to export and apply, comma-separated "
                                        "(kueue,slurm,json)")
    cycle.add_argument("--model", default="default",
                       help="planning model: a name in models/ or a .toml path (default: default)")
    cycle.add_argument("--limits", choices=("time", "work"),
                       help="what stops the solve: work (the default of cycle: counts of "
                            "nodes, rounds and moves, so the same inputs give the same plan "
                            "whatever the machine's load) or time (the model's time limit); "
                            "overrides the model's solver.limits")
    cycle.add_argument("--apply", action="store_true",
                       help="run the cycle's apply.sh; the plan becomes current only if it "
                            "succeeds")
    serve = sub.add_parser("serve", help="a read-only web dashboard and Prometheus /metrics "
                                         "over a planner cycle state folder")
    serve.add_argument("--state", required=True, metavar="DIR",
                       help="the state folder planner cycle writes (DIR/plans, DIR/current)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this machine only; put "
                            "a site's auth proxy in front to share it)")
    serve.add_argument("--port", type=int, default=8080, help="TCP port (default 8080)")
    serve.add_argument("--root-path", dest="root_path", default="",
                       help="URL prefix a reverse proxy serves it under (e.g. /gpu-plan); "
                            "links are made under it")
    tick = sub.add_parser("tick", help="between cycles, act on the queue as the plan in force "
                                       "says: Slurm jobs pending on a spent budget to "
                                       "gp-opportunistic and back, an overdrawn project's "
                                       "work beyond its budget and its pace to "
                                       "gp-overdrawn (rule 8); "
                                       "Kueue's late gangs (rule 7); run every minute")
    tick.add_argument("--state", required=True,
                      help="the state folder planner cycle keeps (DIR/current is the plan "
                           "in force)")
    tick.add_argument("--dry-run", dest="dry_run", action="store_true",
                      help="print what would be done; change nothing")
    tick.add_argument("--squeue", metavar="FILE",
                      help="Slurm: saved squeue output to read instead of running squeue")
    tick.add_argument("--qos", metavar="FILE",
                      help="Slurm: saved `scontrol show assoc_mgr flags=qos` output to read "
                           "instead of running it")
    tick.add_argument("--workloads", metavar="FILE",
                      help="Kueue: saved `kubectl get workloads -A -o json` to read instead "
                           "of running it")
    sweep = sub.add_parser("sweep", help="run a grid of plans or replays (models, lookback, "
                                          "runtime cap, budget shifts, traces, policies) "
                                          "as Ray tasks (pip install 'gpu-planner[sweep]'); "
                                          "one table of results")
    sweep.add_argument("spec", metavar="SPEC.toml",
                       help="the grid (docs/how-to/run-sweeps-on-ray.md)")
    sweep.add_argument("--out", required=True,
                       help="output folder: sweep.csv, sweep.html, timings.csv, cells/<cell>/ "
                            "(finished cells there are not run again)")
    sweep.add_argument("--serial", action="store_true",
                       help="run the cells one by one in this process, without Ray (which "
                            "it then does not need installed)")
    sweep.add_argument("--cpus", type=int,
                       help="CPUs of the local Ray (default: all of this machine's); "
                            "ignored when RAY_ADDRESS names a cluster")
    return parser


def _plan_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--plan", help="plan.json (default: plan the scenario now)")
    command.add_argument("--model", help="planning model (default: the plan's, or default)")
    command.add_argument("--json", action="store_true", help="JSON for machines")


def _version() -> str:
    from planner import __version__

    return __version__


def _with_solver_overrides(model, args):
    from dataclasses import replace

    solver = model.solver
    if args.time_limit is not None:
        solver = replace(solver, time_limit_seconds=args.time_limit)
    if args.mip_gap is not None:
        solver = replace(solver, mip_gap=args.mip_gap)
    if getattr(args, "solver", None) is not None:
        solver = replace(solver, lp_solver=args.solver)
    if getattr(args, "limits", None) is not None:
        solver = replace(solver, limits=args.limits)
    return replace(model, solver=solver)


#: The numeric options and what each must be (``--time-limit`` and ``--mip-gap`` share
#: the model file's rules, :func:`planner.config.solver_option_problems`).
MAX_EXPORT_PERIODS = 10_000


def option_problems(args: argparse.Namespace) -> list[InputProblem]:
    """Every numeric option of every subcommand checked before anything is read or written."""
    from planner.config import solver_option_problems

    problems = [InputProblem(f"--{key.replace('_seconds', '').replace('_', '-')}", None, None,
                             message)
                for key, message in solver_option_problems(getattr(args, "time_limit", None),
                                                           getattr(args, "mip_gap", None))]
    periods = getattr(args, "periods", None)
    if periods is not None and not 1 <= periods <= MAX_EXPORT_PERIODS:
        problems.append(InputProblem("--periods", None, None,
                                     f"must be at least 1 and at most {MAX_EXPORT_PERIODS:,}, "
                                     f"got {periods}"))
    as_of = getattr(args, "as_of", None)
    if as_of is not None and not as_of.strip():
        problems.append(InputProblem("--as-of", None, None,
                                     "is empty; give a date such as 2026-11-16, or leave the "
                                     "option out to plan from the scenario's as_of"))
    return problems


def _plain(status: Status) -> Callable[[str], None]:
    """``status.update`` with the message as plain text.

    Rich reads markup in a string: a path or a name a user wrote (``[/x]``, ``[link=…]``)
    would be styled, hidden or refused with a traceback.
    """
    from rich.text import Text

    return lambda message: status.update(Text(message))


def _run(args, console: Console, err: Console) -> ExitCode:
    from planner.config import load_model
    from planner.inputs.load import load_scenario
    from planner.model.backends import check_solver
    from planner.run import load_previous, parse_as_of, plan_scenario, run_summary, write_outputs

    targets = _export_targets(args.export)
    if targets:  # the exporters (YAML and all) only when asked for
        from planner.exporters.files import export_files
        from planner.exporters.validate import export_problems
    with err.status("loading the scenario", spinner="dots") as status:
        def progress(message: str) -> None:
            if not args.quiet:
                _plain(status)(message)

        scenario = load_scenario(args.scenario, tuple(targets))
        if args.as_of is not None:
            scenario = scenario.with_as_of(parse_as_of(args.as_of, scenario))
        model = _with_solver_overrides(load_model(args.model), args)
        if args.solver is not None:
            check_solver(args.solver)
        else:
            check_solver(model.solver.lp_solver, Path(model.source).name, "solver.lp_solver")
        previous = load_previous(Path(args.previous)) if args.previous else None
        if previous is not None:
            from planner.replan import replan_from

            for warning in replan_from(previous, Path(args.previous).name, scenario):
                err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
        if previous is not None and "slurm" in targets:
            problems = export_problems(previous, Path(args.previous).name, scenario.org,
                                       "slurm")
            if problems:
                raise InputError(problems)
        built = []  # the elastic LP, built whole only for --write-model
        result = plan_scenario(scenario, model, previous, progress,
                               on_built=built.append if args.write_model else None)
        progress("writing")
        exports = {}
        if targets:
            problems = [p for target in targets  # before anything is written
                        for p in export_problems(result.plan.body, "plan.json", scenario.org,
                                                 target)]
            if problems:
                raise InputError(problems)
            exports = {f"{target}/{name}": data  # the plan was checked, its org the scenario's
                       for target in targets for name, data in export_files(
                           result.plan.body, target, scenario.org, 1, previous,
                           budgets=scenario.budgets).items()}
        written = write_outputs(result, Path(args.out), exports)  # all or nothing
        if args.write_model and built:
            from planner.model.modelfile import model_files
            from planner.plan.write import write_files

            try:
                written += write_files(Path(args.write_model),
                                       model_files(built[-1].lp, "elastic"),
                                       "free some space, fix the permissions or choose "
                                       "another --write-model folder")
            except InputError as error:
                error.written = tuple(str(w) for w in written)  # the plan is written
                raise
    if not args.quiet:
        console.print(run_summary(result), markup=False, highlight=False, end="",
                      soft_wrap=True)
        console.print(f"wrote {', '.join(str(p) for p in written)}", markup=False,
                      highlight=False)
    return ExitCode.OK


def _validate(args, console: Console) -> ExitCode:
    from planner.inputs.load import validate_scenario

    problems = validate_scenario(args.scenario, tuple(_export_targets(args.targets, "--for")))
    if problems:
        raise InputError(problems)
    console.print(f"{args.scenario}: valid", markup=False, highlight=False)
    return ExitCode.OK


def _check(args, console: Console) -> ExitCode:
    from planner.check import check_plan
    from planner.inputs.load import load_scenario
    from planner.run import load_previous, parse_as_of

    plan = load_previous(Path(args.plan))
    scenario = load_scenario(args.scenario)
    scenario = scenario.with_as_of(parse_as_of(plan["as_of"], scenario))
    previous = load_previous(Path(args.previous)) if args.previous else None
    violations = check_plan(plan, scenario, previous)
    for violation in violations:
        console.print(str(violation), markup=False, highlight=False)
    console.print(f"{args.plan}: {len(violations)} violation(s)", markup=False, highlight=False)
    return ExitCode.FAILURE if violations else ExitCode.OK


def _export(args, console: Console) -> ExitCode:
    from planner.exporters.files import export_files
    from planner.exporters.validate import export_problems
    from planner.inputs.load import load_scenario
    from planner.plan.write import write_files
    from planner.run import load_previous

    for option, given in (("--per-cluster", args.per_cluster), ("--workloads", args.workloads),
                          ("--late", args.late)):
        if given and args.to != "kueue":
            raise InputError([InputProblem(option, None, None,
                                           "is for Kueue manifests only (--to kueue)")])
    if args.late and not args.workloads:
        raise InputError([InputProblem("--late", None, None,
                                       "needs --workloads (the gangs pending now)")])
    plan = load_previous(Path(args.plan))
    scenario = load_scenario(args.scenario) if args.to != "json" else None
    org = scenario.org if scenario is not None else None
    problems = export_problems(plan, Path(args.plan).name, org, args.to)
    previous = None
    if args.previous:
        previous = load_previous(Path(args.previous))
        problems += export_problems(previous, Path(args.previous).name, org, args.to)
    gangs = None
    if args.workloads and not problems:  # (a plan that breaks its schema has no clusters)
        from planner.exporters.kueue import allowed_clusters
        from planner.ingest.pending import pending_gangs

        allowed = allowed_clusters(scenario.budgets)
        gangs, bad = pending_gangs(Path(args.workloads), plan["clusters"], scenario.tree.leaves,
                                   allowed)
        problems += bad
    applied = None
    if args.late and not problems:
        from planner.exporters.set_in_force import read_set

        applied, bad = read_set(Path(args.late), plan, scenario.org, allowed)
        problems += bad
    if problems:
        raise InputError(problems)
    if applied is not None:
        return _export_late(args, console, plan, applied, gangs)
    files = export_files(plan, args.to, org, args.periods, previous, args.per_cluster,
                         scenario.budgets if scenario is not None else None,
                         gangs.widest if gangs is not None else None)
    written = write_files(Path(args.out), files)
    if gangs is not None:
        from planner.exporters.kueue import first_period_widening

        lines = gangs.lines()
        for project, cluster, gpus in first_period_widening(
                plan, list(scenario.tree.leaves), allowed, gangs.widest):
            lines.append(f"  widened: {project!r} on {cluster!r}, nominal quota {gpus} GPUs")
        for line in lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {', '.join(str(p) for p in written)}", markup=False, highlight=False)
    return ExitCode.OK


def _export_late(args, console: Console, plan: dict, applied: list, gangs) -> ExitCode:
    """``planner export --late``: rule 7 on the set in force, written under its own name."""
    from planner.exporters.kueue import set_text
    from planner.plan.write import write_files
    from planner.tick import late_step

    done = late_step(plan, applied, gangs.widest)
    written = write_files(Path(args.out), {Path(args.late).name: set_text(applied).encode()})
    lines = gangs.lines()
    for project, cluster, gpus in done:
        lines.append(f"  late: {project!r} on {cluster!r}, nominal quota {gpus} GPUs")
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {', '.join(str(p) for p in written)}", markup=False, highlight=False)
    return ExitCode.OK


def _export_targets(text: str | None, option: str = "--export") -> list[str]:
    from planner.exporters.files import TARGETS

    targets = [t.strip() for t in (text or "").split(",") if t.strip()]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise InputError([InputProblem(option, None, None,
                                       f"unknown target(s) {', '.join(unknown)}; "
                                       f"choose from {', '.join(TARGETS)}")])
    return sorted(set(targets), key=TARGETS.index)


def _report(args, console: Console) -> ExitCode:
    from planner.config import load_model
    from planner.contract import unbudgeted_ngh
    from planner.inputs.load import load_scenario_and_unbudgeted
    from planner.run import load_previous, parse_as_of, plan_scenario

    out = Path(args.out)
    suffix = out.suffix.lower()
    if suffix not in (".xlsx", ".html"):
        raise InputError([InputProblem("--out", None, None,
                                       f"{args.out!r}: the report is FILE.xlsx or FILE.html")])
    scenario, off_budget = load_scenario_and_unbudgeted(args.scenario)  # one read of both
    if args.plan:
        plan = load_previous(Path(args.plan))
        if plan["input_digest"] != scenario.digest:
            raise InputError([InputProblem(
                Path(args.plan).name, None, "input_digest",
                f"planned from other inputs than {args.scenario} (plan {plan['scenario']!r}, "
                f"input_digest {plan['input_digest'][:12]}…; the scenario's is "
                f"{scenario.digest[:12]}…): a report would mix two scenarios; pass the "
                "scenario the plan was made from, or leave out --plan to plan this one")])
        scenario = scenario.with_as_of(parse_as_of(plan["as_of"], scenario))
        model = load_model(args.model) if args.model else None  # None: the plan's, if known
    else:
        model = load_model(args.model or "default")
        plan = plan_scenario(scenario, model).plan.body
    if not out.parent.is_dir():
        raise InputError([InputProblem("--out", None, None,
                                       f"{str(out.parent)!r} is not a folder")])
    unbudgeted = unbudgeted_ngh(plan, off_budget)  # the Why pages' rule 8, as explain's
    if suffix == ".xlsx":
        from planner.reports.workbook import write_workbook

        written = write_workbook(plan, scenario, out, model, unbudgeted)
    else:
        from planner.reports.html import write_html

        written = write_html(plan, scenario, out, model, unbudgeted)
    console.print(f"wrote {written}", markup=False, highlight=False)
    return ExitCode.OK


def _simulate(args, console: Console, err: Console) -> ExitCode:
    from planner.config import load_model
    from planner.inputs.load import load_scenario
    from planner.plan.write import write_files
    from planner.results import load_now
    from planner.simulate.run import (
        POLICY_NAMES,
        output_files,
        parse_policies,
        parse_seeds,
        parse_window,
        simulate,
        table_rows,
        windowed,
        write_replay_result,
    )
    from planner.simulate.trace import read_trace

    names = list(POLICY_NAMES) if args.policy is None else parse_policies(args.policy)
    seeds = None if args.seeds is None else parse_seeds(args.seeds)
    model = load_model(args.model)
    default = PHILLY_SCENARIO if PHILLY_SCENARIO.is_dir() else SAMPLE
    scenario = load_scenario(args.scenario or str(default))
    window = parse_window(args.start, args.end, scenario)
    trace = read_trace(Path(args.trace), scenario)
    if window is not None:
        scenario, trace = windowed(scenario, trace, *window)
    load = load_now()
    with err.status("replaying", spinner="dots") as status:
        def progress(step) -> None:  # a spinner on a terminal; a line a week into a log
            if err.is_terminal:
                _plain(status)(step.line())
            elif step.done or (step.hours_done > 0 and round(step.hours_done) % 168 == 0):
                err.print(step.line(), markup=False, highlight=False)

        runs = simulate(scenario, trace, names, progress, model, seeds)
        status.update("writing metrics, pictures and jobs")
        written = write_files(Path(args.out), output_files(scenario, trace, runs, model.name))
    from rich.table import Table
    from rich.text import Text

    header, rows = table_rows(runs)  # the scenario's name as text, never as markup
    table = Table(title=Text(f"{len(trace):,} jobs replayed on {scenario.config.name}"))
    table.add_column("metric")
    for row in rows:  # one column per policy: fits a terminal whatever the metric count
        table.add_column(row[0], justify="right")
    for i, name in enumerate(header[1:], start=1):
        table.add_row(name, *(row[i] for row in rows))
    console.print(table)
    console.print(f"wrote {len(written)} files into {args.out}", markup=False, highlight=False)
    if args.result:
        import shlex

        # the command as given (the same whether run as a process or in-process)
        command = shlex.join(["planner", "simulate", *([args.scenario] if args.scenario else []),
                              "--trace", args.trace,
                              *(["--policy", args.policy] if args.policy else []),
                              *(["--seeds", args.seeds] if args.seeds else []),
                              "--model", args.model, "--out", args.out,
                              "--result", args.result])
        path = write_replay_result(Path(args.result), runs, scenario, trace,
                                   f"the trace `{Path(args.trace).name}`", command=command,
                                   load_before=load)
        console.print(f"wrote {path}", markup=False, highlight=False)
    return ExitCode.OK


def _plan_for(args, scenario: Scenario | None = None) -> tuple[dict, Scenario, ModelConfig]:
    """The plan, the scenario at its as_of, and the planning model.

    ``--plan`` is refused unless made from the scenario; without it the scenario is
    planned now. ``scenario``: ``--scenario`` as loaded already (default: load it).
    """
    from planner.config import load_model
    from planner.explain import check_plan_matches
    from planner.inputs.load import load_scenario
    from planner.run import load_previous, parse_as_of, plan_scenario

    scenario = load_scenario(args.scenario) if scenario is None else scenario
    if args.plan:
        plan = load_previous(Path(args.plan))
        check_plan_matches(plan, scenario, Path(args.plan).name)
        model = load_model(args.model or plan["model"])
        return plan, scenario.with_as_of(parse_as_of(plan["as_of"], scenario)), model
    model = load_model(args.model or "default")
    return plan_scenario(scenario, model).plan.body, scenario, model


def _print_json(console: Console, body: dict) -> None:
    import json

    console.print(json.dumps(body, indent=1, ensure_ascii=False, allow_nan=False),
                  markup=False, highlight=False, soft_wrap=True)


def _explain(args, console: Console) -> ExitCode:
    from planner.contract import unbudgeted_ngh
    from planner.explain import build_context, explain, explanation_lines
    from planner.inputs.load import load_scenario_and_unbudgeted

    scenario, off_budget = load_scenario_and_unbudgeted(args.scenario)  # one read of both
    plan, scenario, model = _plan_for(args, scenario)
    explanation = explain(build_context(plan, scenario, model, args.period,
                                        unbudgeted_ngh(plan, off_budget)), args.node)
    if args.json:
        _print_json(console, explanation.as_json())
    else:
        for line in explanation_lines(explanation):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    return ExitCode.OK


def _status(args, console: Console) -> ExitCode:
    from rich.text import Text

    from planner.status import OPPORTUNISTIC, OVERRUN, UNUSED, plan_status, status_lines

    plan, scenario, _ = _plan_for(args)
    status = plan_status(plan, scenario)
    if args.json:
        _print_json(console, status.as_json())
        return ExitCode.OK
    lines = status_lines(status)
    styles = {2: "bold"}  # the header; a row's colour follows its risk flag
    for i, row in enumerate(status.rows, start=3):
        styles[i] = ("red" if OVERRUN in row.flags else "yellow" if UNUSED in row.flags
                     else "magenta" if OPPORTUNISTIC in row.flags else "")
    for i, line in enumerate(lines):  # colour only on a terminal: rich drops it when piped
        console.print(Text(line, style=styles.get(i, "")), soft_wrap=True)
    return ExitCode.OK


def _trace_philly(args, console: Console) -> ExitCode:
    from planner.inputs.load import load_scenario
    from planner.simulate.philly import philly_conversion
    from planner.simulate.trace import write_trace

    scenario = load_scenario(args.scenario)
    conversion = philly_conversion(Path(args.source), scenario)
    written = write_trace(conversion.trace, Path(args.out))
    for line in conversion.lines():
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {written}", markup=False, highlight=False)
    return ExitCode.OK


def _ingest(args, console: Console) -> ExitCode:
    import pandas as pd

    from planner.ingest import ingest_usage
    from planner.inputs.validate import DATE_HINT, parse_datetime

    now = None
    if args.now is not None:
        stamp = parse_datetime(args.now)
        if stamp is None:
            raise InputError([InputProblem("--now", None, None,
                                           f"{args.now!r} is not a time; {DATE_HINT}")])
        now = pd.Timestamp(stamp)
    if args.demand and args.source != "kueue":
        raise InputError([InputProblem("--demand", None, None, "is for kueue (squeue always "
                                       "writes demand.csv; sacct holds no queue)")])
    if args.state and args.source != "squeue":
        raise InputError([InputProblem("--state", None, None, "is for squeue")])
    lines = []
    if args.source == "squeue" or args.demand:
        from planner.ingest.queue import ingest_demand
        from planner.tick import moved_jobs

        def demand(dry_run: bool):
            return ingest_demand(Path(args.scenario), args.source, Path(args.file), now=now,
                                 dry_run=dry_run, forecast=args.forecast,
                                 moved=moved_jobs(Path(args.state)) if args.state else None)

        demand(True)  # the queue read (and refused) before the usage ingest writes
    if args.source != "squeue":
        lines += ingest_usage(Path(args.scenario), args.source, Path(args.file), now,
                              args.dry_run).lines()
    if args.source == "squeue" or args.demand:
        lines += demand(args.dry_run).lines()
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return ExitCode.OK


def _tick(args, console: Console, err: Console) -> ExitCode:
    from planner.tick_run import run_tick

    files = {k: Path(v) if v else None for k, v in (("squeue", args.squeue), ("qos", args.qos),
                                                   ("workloads", args.workloads))}
    result = run_tick(Path(args.state), dry_run=args.dry_run, **files)
    for line in result.lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for line in result.failed:
        err.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
    return ExitCode.FAILURE if result.failed else ExitCode.OK


def _trace_synthetic(args, console: Console) -> ExitCode:
    from planner.inputs.load import load_scenario
    from planner.simulate.synthetic import SyntheticParams, synthetic_trace
    from planner.simulate.trace import write_trace

    defaults = SyntheticParams()
    args.jobs = defaults.jobs if args.jobs is None else args.jobs
    args.load = defaults.load if args.load is None else args.load
    if args.jobs < 1 or not args.load > 0:
        raise InputError([InputProblem("--jobs" if args.jobs < 1 else "--load", None, None,
                                       "must be a positive number")])
    scenario = load_scenario(args.scenario)
    params = SyntheticParams(jobs=args.jobs, load=args.load)
    try:
        frame = synthetic_trace(scenario, args.seed, params)
    except ValueError as error:
        raise InputError([InputProblem("--jobs", None, None, str(error))]) from None
    written = write_trace(frame, Path(args.out))
    gang = (frame["gpus"] >= 8).mean()
    console.print(f"{len(frame):,} jobs on {scenario.config.name}, seed {args.seed}, offered "
                  f"load {params.load:g} × capacity; {gang:.0%} of the jobs of 8 GPUs or more",
                  markup=False, highlight=False)
    console.print(f"wrote {written}", markup=False, highlight=False)
    return ExitCode.OK


def _need_sample(args: argparse.Namespace) -> None:
    """Refuse a SCENARIO left to its default where there is no bundled sample (a wheel)."""
    for name in ("scenario",):
        if getattr(args, name, None) == str(SAMPLE) and not SAMPLE.is_dir():
            raise InputError([InputProblem(
                "SCENARIO" if args.command != "export" else "--scenario", None, None,
                "no scenario given, and the bundled sample is not here (it ships with the "
                "source checkout, data/sample, not with the installed package): pass a "
                "scenario folder or .xlsx workbook")])


def _cycle(args, console: Console, err: Console) -> ExitCode:
    from planner.config import load_model, with_limits
    from planner.cycle import ApplyError, current_folder, run_cycle
    from planner.times import iso

    targets = _export_targets(args.export)
    if args.sacct and args.kueue:
        raise InputError([InputProblem("--sacct", None, None, "and --kueue: give one "
                                       "accounting file (--squeue goes with --sacct)")])
    source = (("sacct", Path(args.sacct)) if args.sacct
              else ("kueue", Path(args.kueue)) if args.kueue else None)
    queue = (("squeue", Path(args.squeue)) if args.squeue
             else ("kueue", Path(args.kueue)) if args.kueue else None)
    state = Path(args.state)
    try:
        with err.status("planning cycle", spinner="dots") as status:
            model = load_model(args.model)
            if args.limits is not None:
                model = with_limits(model, args.limits)
            result = run_cycle(Path(args.scenario), state, model,
                               as_of=args.as_of, source=source, targets=targets,
                               apply=args.apply, progress=_plain(status), queue=queue)
    except (InputError, SolverError, ApplyError) as error:
        try:
            current = current_folder(state)
        except InputError:
            current = None
        kept = (f"{state / 'current'} still points at {current.name}" if current
                else "no plan is current")
        err.print(f"cycle failed, {kept}", markup=False, highlight=False, soft_wrap=True)
        for ledger in error.written:
            err.print(f"{ledger} took the ingest and keeps it (a job counts once: running the "
                      "cycle again does not count it twice)", markup=False, highlight=False,
                      soft_wrap=True)
        if isinstance(error, ApplyError):
            err.print(f"error: {error}", markup=False, highlight=False, soft_wrap=True)
            return int(ExitCode.FAILURE)
        raise
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    for line in result.ingest_lines:
        say(line)
    for warning in result.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    for line in result.change_lines:
        say(line)
    made = "unchanged (the same bytes were kept already)" if result.unchanged else "written"
    origin = f"replanned from {result.previous.name}" if result.previous else "no previous plan"
    say(f"plan as of {iso(result.as_of)}: {result.folder} {made}; {origin}")
    ran = "applied" if result.applied else "not run (--apply runs it)"
    say(f"{state / 'current'} -> {result.folder.name}; {result.folder / 'apply.sh'} {ran}")
    return ExitCode.OK


def _serve(args, console: Console, err: Console) -> ExitCode:
    from planner.serve.app import serve
    from planner.serve.state import current_name

    state = Path(args.state)
    if not state.is_dir():
        raise InputError([InputProblem("--state", None, None,
                                       f"{args.state!r} is not a folder; pass the state folder "
                                       "planner cycle --state writes")])
    if not 0 < args.port < 65536:
        raise InputError([InputProblem("--port", None, None,
                                       f"must be 1 to 65535, got {args.port}")])
    if args.root_path and (not args.root_path.startswith("/") or args.root_path.endswith("/")):
        raise InputError([InputProblem("--root-path", None, None,
                                       f"{args.root_path!r}: give a prefix like /gpu-plan "
                                       "(a leading /, no trailing /)")])
    if current_name(state) is None:
        err.print(f"warning: {state / 'current'} points at no kept plan yet; the pages say so "
                  "until planner cycle makes one", markup=False, highlight=False)
    serve(state, args.host, args.port, args.root_path,
          ready=lambda text: console.print(text, markup=False, highlight=False))
    return ExitCode.OK


def _sweep(args, console: Console, err: Console) -> ExitCode:
    import os

    from planner.sweep.cells import prepare
    from planner.sweep.run import run_sweep
    from planner.sweep.spec import load_spec

    if args.cpus is not None and not 1 <= args.cpus <= 4096:
        raise InputError([InputProblem("--cpus", None, None,
                                       f"must be at least 1 and at most 4096, got {args.cpus}")])
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError([InputProblem("--out", None, None,
                                       f"{args.out!r} is a file; give a folder")])
    if not args.serial:
        from planner.extras import require

        require("ray", "planner sweep", instead="or run the cells one by one with --serial")
    spec = load_spec(args.spec)
    with err.status("reading the sweep's inputs", spinner="dots") as status:
        inputs = prepare(spec, _plain(status))
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    engine = "serial" if args.serial else "ray"
    where = ("one by one" if args.serial else
             f"on the Ray cluster at {os.environ['RAY_ADDRESS']}"
             if os.environ.get("RAY_ADDRESS") else "on a local Ray")
    say(f"{len(inputs)} {spec.kind} cells {where}")

    def progress(done: int, total: int, outcome) -> None:
        item = outcome.item
        axes = " ".join(f"{a}={item.cell.axis_text(a)}" for a in spec.axes)
        took = "finished before, reused" if outcome.reused else f"{outcome.seconds:.1f} s"
        say(f"[{done}/{total}] {item.cell_id} {axes}: {took}")

    outcomes = run_sweep(spec, inputs, out, engine, progress, args.cpus)
    reused = sum(o.reused for o in outcomes)
    say(f"wrote {out / 'sweep.csv'}, {out / 'sweep.html'}, {out / 'timings.csv'} "
        f"({len(outcomes)} cells, {reused} reused)")
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (testable in-process)."""
    parser = _parser()
    parser.argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    from rich.console import Console

    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    try:
        problems = option_problems(args)
        if problems:
            raise InputError(problems)
        _need_sample(args)
        if args.command == "run":
            return int(_run(args, console, err))
        if args.command == "check":
            return int(_check(args, console))
        if args.command == "export":
            return int(_export(args, console))
        if args.command == "report":
            return int(_report(args, console))
        if args.command == "simulate":
            return int(_simulate(args, console, err))
        if args.command == "trace" and args.trace_command == "synthetic":
            return int(_trace_synthetic(args, console))
        if args.command == "trace":
            return int(_trace_philly(args, console))
        if args.command == "ingest":
            return int(_ingest(args, console))
        if args.command == "explain":
            return int(_explain(args, console))
        if args.command == "status":
            return int(_status(args, console))
        if args.command == "cycle":
            return int(_cycle(args, console, err))
        if args.command == "serve":
            return int(_serve(args, console, err))
        if args.command == "sweep":
            return int(_sweep(args, console, err))
        if args.command == "tick":
            return int(_tick(args, console, err))
        return int(_validate(args, console))
    except InputError as error:
        for problem in error.problems:
            err.print(f"error: {problem}", markup=False, highlight=False, soft_wrap=True)
        done = (f"nothing else written (written before it: {', '.join(error.written)})"
                if error.written else "nothing written")
        err.print(f"{len(error.problems)} problem(s); {done}", markup=False, soft_wrap=True)
        return int(ExitCode.BAD_INPUT)
    except SolverError as error:
        err.print(f"error: {error}", markup=False, highlight=False)
        return int(ExitCode.FAILURE)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
