"""The ``planner`` command: parse, call the library, map errors to exit codes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from planner import __version__
from planner.check import check_plan
from planner.config import load_model
from planner.errors import ExitCode, InputError, InputProblem, SolverError
from planner.exporters.files import TARGETS, export_files
from planner.exporters.validate import export_problems
from planner.inputs.load import load_scenario, validate_scenario
from planner.plan.write import write_files
from planner.run import (
    SAMPLE,
    load_previous,
    parse_as_of,
    plan_scenario,
    run_summary,
    write_outputs,
)
from planner.simulate.philly import PHILLY_CSV, PHILLY_SCENARIO, philly_conversion
from planner.simulate.trace import write_trace


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="planner", description=(
        "Plan GPU-hours and whole-node reservations for projects, to budgets and "
        "strategic weights, under capacity."))
    parser.add_argument("--version", action="version", version=f"planner {__version__}")
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
    run.add_argument("--quiet", action="store_true", help="no progress, no summary")
    run.add_argument("--export", help="also export the first period to these targets, "
                                      "comma-separated (kueue,slurm,json), into DIR/<target>/")
    validate = sub.add_parser("validate", help="check a scenario's inputs; change nothing")
    validate.add_argument("scenario", help="scenario folder or .xlsx workbook")
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
    report = sub.add_parser("report", help="leadership's quarterly report: .xlsx or .html")
    report.add_argument("scenario", nargs="?", default=str(SAMPLE),
                        help="scenario folder or .xlsx workbook (default: the bundled sample)")
    report.add_argument("--plan", help="plan.json to report on (default: plan the scenario now)")
    report.add_argument("--model", default="default",
                        help="planning model for a fresh plan (default: default)")
    report.add_argument("--out", required=True, help="FILE.xlsx or FILE.html")
    simulate = sub.add_parser("simulate", help="replay a job trace under scheduling policies "
                                               "and compare what they deliver")
    simulate.add_argument("scenario", nargs="?", default=None,
                          help="scenario folder or .xlsx workbook (default: data/philly if "
                               "present, else the bundled sample)")
    simulate.add_argument("--trace", required=True, help="the trace CSV")
    simulate.add_argument("--policy", default="priority,fairtree,quota,lookback,planner",
                          help="comma-separated policies (default: all five)")
    simulate.add_argument("--out", required=True, help="output folder")
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
    ingest = sub.add_parser("ingest", help="append what ran (sacct or Kueue Workloads) to a "
                                           "scenario's usage.csv, once per job")
    ingest.add_argument("source", choices=("sacct", "kueue"),
                        help="sacct: `sacct --parsable2 --noheader --allocations "
                             "--format=JobIDRaw,Account,Partition,AllocTRES,Start,End,State`; "
                             "kueue: `kubectl get workloads -A -o json`")
    ingest.add_argument("file", help="the saved output")
    ingest.add_argument("scenario", nargs="?", default=str(SAMPLE),
                        help="scenario folder whose usage.csv to update (default: the bundled "
                             "sample)")
    ingest.add_argument("--now", help="end jobs still running here (default: the current UTC "
                                      "time)")
    ingest.add_argument("--dry-run", dest="dry_run", action="store_true",
                        help="report what would change; write nothing")
    cycle = sub.add_parser("cycle", help="one planning cycle: ingest, plan from the last plan, "
                                         "export, apply.sh; history in --state DIR")
    cycle.add_argument("scenario", help="scenario folder (its usage.csv takes the ingest)")
    cycle.add_argument("--state", required=True,
                       help="state folder: DIR/plans/<as_of>/ per cycle, DIR/current the plan "
                            "in force")
    cycle.add_argument("--as-of", dest="as_of",
                       help="plan from this time (default: now, floored to the period grid)")
    accounting = cycle.add_mutually_exclusive_group()
    accounting.add_argument("--sacct", help="sacct output to ingest first (planner ingest sacct)")
    accounting.add_argument("--kueue", help="Kueue Workloads JSON to ingest first "
                                            "(planner ingest kueue)")
    cycle.add_argument("--export", help="targets to export and apply, comma-separated "
                                        "(kueue,slurm,json)")
    cycle.add_argument("--model", default="default",
                       help="planning model: a name in models/ or a .toml path (default: default)")
    cycle.add_argument("--apply", action="store_true",
                       help="run the cycle's apply.sh; the plan becomes current only if it "
                            "succeeds")
    return parser


def _with_solver_overrides(model, args):
    from dataclasses import replace

    solver = model.solver
    if args.time_limit is not None:
        solver = replace(solver, time_limit_seconds=args.time_limit)
    if args.mip_gap is not None:
        solver = replace(solver, mip_gap=args.mip_gap)
    return replace(model, solver=solver)


def _run(args, console: Console, err: Console) -> ExitCode:
    targets = _export_targets(args.export)
    with err.status("loading the scenario", spinner="dots") as status:
        def progress(message: str) -> None:
            if not args.quiet:
                status.update(message)

        scenario = load_scenario(args.scenario)
        if args.as_of:
            scenario = scenario.with_as_of(parse_as_of(args.as_of, scenario))
        model = _with_solver_overrides(load_model(args.model), args)
        previous = load_previous(Path(args.previous)) if args.previous else None
        if previous is not None:
            from planner.replan import replan_from

            for warning in replan_from(previous, Path(args.previous).name, scenario):
                err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
        if previous is not None and "slurm" in targets:
            problems = export_problems(previous, Path(args.previous).name, scenario.org)
            if problems:
                raise InputError(problems)
        result = plan_scenario(scenario, model, previous, progress)
        progress("writing")
        written = write_outputs(result, Path(args.out))
        for target in targets:  # the plan was checked, its org is the scenario's
            written += write_files(Path(args.out) / target, export_files(
                result.plan.body, target, scenario.org, 1, previous))
    if not args.quiet:
        console.print(run_summary(result), markup=False, highlight=False, end="",
                      soft_wrap=True)
        console.print(f"wrote {', '.join(str(p) for p in written)}", markup=False,
                      highlight=False)
    return ExitCode.OK


def _validate(args, console: Console) -> ExitCode:
    problems = validate_scenario(args.scenario)
    if problems:
        raise InputError(problems)
    console.print(f"{args.scenario}: valid", markup=False, highlight=False)
    return ExitCode.OK


def _check(args, console: Console) -> ExitCode:
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
    if args.periods < 1:
        raise InputError([InputProblem("--periods", None, None, "must be at least 1")])
    if args.per_cluster and args.to != "kueue":
        raise InputError([InputProblem("--per-cluster", None, None,
                                       "splits Kueue manifests only (--to kueue)")])
    plan = load_previous(Path(args.plan))
    org = load_scenario(args.scenario).org if args.to != "json" else None
    problems = export_problems(plan, Path(args.plan).name, org)
    previous = None
    if args.previous:
        previous = load_previous(Path(args.previous))
        problems += export_problems(previous, Path(args.previous).name, org)
    if problems:
        raise InputError(problems)
    files = export_files(plan, args.to, org, args.periods, previous, args.per_cluster)
    written = write_files(Path(args.out), files)
    console.print(f"wrote {', '.join(str(p) for p in written)}", markup=False, highlight=False)
    return ExitCode.OK


def _export_targets(text: str | None) -> list[str]:
    targets = [t.strip() for t in (text or "").split(",") if t.strip()]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise InputError([InputProblem("--export", None, None,
                                       f"unknown target(s) {', '.join(unknown)}; "
                                       f"choose from {', '.join(TARGETS)}")])
    return sorted(set(targets), key=TARGETS.index)


def _report(args, console: Console) -> ExitCode:
    out = Path(args.out)
    suffix = out.suffix.lower()
    if suffix not in (".xlsx", ".html"):
        raise InputError([InputProblem("--out", None, None,
                                       f"{args.out!r}: the report is FILE.xlsx or FILE.html")])
    scenario = load_scenario(args.scenario)
    if args.plan:
        plan = load_previous(Path(args.plan))
        scenario = scenario.with_as_of(parse_as_of(plan["as_of"], scenario))
    else:
        plan = plan_scenario(scenario, load_model(args.model)).plan.body
    if not out.parent.is_dir():
        raise InputError([InputProblem("--out", None, None,
                                       f"{str(out.parent)!r} is not a folder")])
    if suffix == ".xlsx":
        from planner.reports.workbook import write_workbook

        written = write_workbook(plan, scenario, out)
    else:
        from planner.reports.html import write_html

        written = write_html(plan, scenario, out)
    console.print(f"wrote {written}", markup=False, highlight=False)
    return ExitCode.OK


def _simulate(args, console: Console, err: Console) -> ExitCode:
    from planner.simulate.run import output_files, parse_policies, simulate, table_rows
    from planner.simulate.trace import read_trace

    names = parse_policies(args.policy)
    default = PHILLY_SCENARIO if PHILLY_SCENARIO.is_dir() else SAMPLE
    scenario = load_scenario(args.scenario or str(default))
    trace = read_trace(Path(args.trace), scenario)
    with err.status("replaying", spinner="dots") as status:
        runs = simulate(scenario, trace, names, status.update)
        status.update("writing metrics, pictures and jobs")
        written = write_files(Path(args.out), output_files(scenario, trace, runs))
    from rich.table import Table

    header, rows = table_rows(runs)
    table = Table(title=f"{len(trace):,} jobs replayed on {scenario.config.name}")
    table.add_column("metric")
    for row in rows:  # one column per policy: fits a terminal whatever the metric count
        table.add_column(row[0], justify="right")
    for i, name in enumerate(header[1:], start=1):
        table.add_row(name, *(row[i] for row in rows))
    console.print(table)
    console.print(f"wrote {len(written)} files into {args.out}", markup=False, highlight=False)
    return ExitCode.OK


def _trace_philly(args, console: Console) -> ExitCode:
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
    report = ingest_usage(Path(args.scenario), args.source, Path(args.file), now, args.dry_run)
    for line in report.lines():
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return ExitCode.OK


def _cycle(args, console: Console, err: Console) -> ExitCode:
    from planner.cycle import ApplyError, current_folder, run_cycle
    from planner.times import iso

    targets = _export_targets(args.export)
    source = (("sacct", Path(args.sacct)) if args.sacct
              else ("kueue", Path(args.kueue)) if args.kueue else None)
    state = Path(args.state)
    try:
        with err.status("planning cycle", spinner="dots") as status:
            result = run_cycle(Path(args.scenario), state, load_model(args.model),
                               as_of=args.as_of, source=source, targets=targets,
                               apply=args.apply, progress=status.update)
    except (InputError, SolverError, ApplyError) as error:
        try:
            current = current_folder(state)
        except InputError:
            current = None
        kept = (f"{state / 'current'} still points at {current.name}" if current
                else "no plan is current")
        err.print(f"cycle failed, {kept}", markup=False, highlight=False, soft_wrap=True)
        if isinstance(error, ApplyError):
            err.print(f"error: {error}", markup=False, highlight=False, soft_wrap=True)
            return int(ExitCode.FAILURE)
        raise
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    for line in result.ingest_lines:
        say(line)
    for warning in result.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    made = "unchanged (the same bytes were kept already)" if result.unchanged else "written"
    origin = f"replanned from {result.previous.name}" if result.previous else "no previous plan"
    say(f"plan as of {iso(result.as_of)}: {result.folder} {made}; {origin}")
    ran = "applied" if result.applied else "not run (--apply runs it)"
    say(f"{state / 'current'} -> {result.folder.name}; {result.folder / 'apply.sh'} {ran}")
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (testable in-process)."""
    args = _parser().parse_args(argv)
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    try:
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
        if args.command == "trace":
            return int(_trace_philly(args, console))
        if args.command == "ingest":
            return int(_ingest(args, console))
        if args.command == "cycle":
            return int(_cycle(args, console, err))
        return int(_validate(args, console))
    except InputError as error:
        for problem in error.problems:
            err.print(f"error: {problem}", markup=False, highlight=False)
        err.print(f"{len(error.problems)} problem(s); nothing written", markup=False)
        return int(ExitCode.BAD_INPUT)
    except SolverError as error:
        err.print(f"error: {error}", markup=False, highlight=False)
        return int(ExitCode.FAILURE)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
