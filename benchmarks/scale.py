"""Benchmark: planning at 100× (5,984 projects, 800 clusters) and on hourly grids.

    nice python benchmarks/scale.py [--runs 3] [--cases x100,x100-mixed,x1-hourly,...]
                                    [--limits time|work] [--code DIR] [--name scale]

Cases (scenarios generated once into benchmarks/out/ by data/generate.py):

- ``x100``: the sample at 100× as generated (daily periods, 46 from its ``as_of``);
- ``x100-mixed``: the same with ``period_hours = 1``, planned on the mixed grid
  ``solver.period_grid = "1h*48, 24h"`` (48 hourly periods, then daily ones: 92);
- ``x1-hourly``: the bundled sample with ``period_hours = 1`` on the uniform grid
  (1,104 hourly periods from its ``as_of``); ``x1-hourly-quarter``: the same planned from
  the quarter's start (2,208 periods);
- ``x10-hourly``: the 10× sample by the hour on the uniform grid (1,104 periods), given
  ``--time-limit 900``: how long it takes when it may.

Each run is a fresh process (benchmarks/one_run.py, the default model; ``--limits``: its
``solver.limits``, ``time`` by default as ``planner run`` plans, ``work`` as ``planner
cycle`` plans, the elastic LP then solved to its end whatever the load):
its CPU seconds (user + system, with its LP helper), wall seconds, peak resident memory
(its own and its helper's), the stages' status and gap, the elastic LP's seconds and the
plan's SHA-256. ``--code DIR`` runs another checkout's planner (``PYTHONPATH=DIR``; its
``benchmarks/one_run.py``), e.g. the code before the sparse demand, for a before figure.
Writes ``benchmarks/results/<--name>.json`` (:func:`planner.results.write_result`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.results import load_now, write_result  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
MIXED = "1h*48, 24h"


def generated(scale: int) -> Path:
    """The sample at ``scale``, generated once (the bundled sample at 1)."""
    if scale == 1:
        return ROOT / "data" / "sample"
    target = OUT / f"sample-x{scale}"
    if not (target / "scenario.toml").exists():
        subprocess.run([sys.executable, str(ROOT / "data" / "generate.py"), "--scale",
                        str(scale), "--out", str(target)], check=True, capture_output=True)
    return target


def hourly(scale: int) -> Path:
    """The sample at ``scale`` with ``period_hours = 1`` (the other files as they are)."""
    source = generated(scale)
    target = OUT / f"sample-x{scale}-hourly"
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_file():
            text = item.read_text(encoding="utf-8")
            if item.name == "scenario.toml":
                text = "\n".join("period_hours = 1" if line.startswith("period_hours") else line
                                 for line in text.splitlines()) + "\n"
            (target / item.name).write_text(text, encoding="utf-8")
    return target


def mixed_model() -> Path:
    """The default model with ``solver.period_grid = MIXED``."""
    default = (ROOT / "planner" / "models" / "default.toml").read_text(encoding="utf-8")
    path = OUT / "mixed-model.toml"
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(default.replace('name = "default"', 'name = "mixed"')
                    + f'period_grid = "{MIXED}"\n', encoding="utf-8")
    return path


def cases() -> dict[str, tuple[str, Callable[[], list[str]]]]:
    """Case -> (description, a function giving one_run.py's arguments)."""
    return {
        "x100": ("100× daily (46 periods)", lambda: [str(generated(100)), "default"]),
        "x100-mixed": (f"100× on the mixed grid {MIXED!r} (92 periods)",
                       lambda: [str(hourly(100)), str(mixed_model())]),
        "x1-hourly": ("1× uniform hourly (1,104 periods)", lambda: [str(hourly(1)), "default"]),
        "x1-hourly-quarter": ("1× uniform hourly from the quarter's start (2,208 periods)",
                              lambda: [str(hourly(1)), "default", "--as-of", "2026-10-01"]),
        "x10-hourly": ("10× uniform hourly (1,104 periods), --time-limit 900",
                       lambda: [str(hourly(10)), "default", "--time-limit", "900"]),
    }


def one(argv: list[str], code: Path | None, limits: str = "time") -> dict:
    """One fresh one_run.py process: its figures, wall seconds and the load at its end."""
    env = dict(os.environ)
    script = ROOT / "benchmarks" / "one_run.py"
    if code is not None:
        env["PYTHONPATH"] = str(code)
        script = code / "benchmarks" / "one_run.py"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(script), *argv, "--limits", limits],
                          capture_output=True, text=True, env=env, cwd=OUT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"failed": last, "wall_s": wall, "load": os.getloadavg()[0]}
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {**figures, "wall_s": wall, "load": os.getloadavg()[0]}


def main() -> None:
    """Run the cases, print each run, write the result file."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", default="x100,x100-mixed,x1-hourly,x1-hourly-quarter")
    parser.add_argument("--code", type=Path, help="another checkout's planner, for a before row")
    parser.add_argument("--limits", choices=("time", "work"), default="time")
    parser.add_argument("--name", default="scale")
    args = parser.parse_args()
    load_before = load_now()
    known = cases()
    rows, notes = [], []
    for name in args.cases.split(","):
        what, argv = known[name]
        results = []
        for n in range(args.runs):
            r = one(argv(), args.code.resolve() if args.code else None, args.limits)
            print(name, n + 1, json.dumps({k: v for k, v in r.items() if k != "stages"}),
                  flush=True)
            results.append(r)
            stages = r.get("stages", [])
            rows.append({"case": name, "what": what, "limits": args.limits, "run": n + 1,
                         "periods": r.get("periods"), "projects": r.get("projects"),
                         "clusters": r.get("clusters"),
                         "status": r.get("status", "no plan: " + r.get("failed", "")),
                         "gap_pct": round(100 * r["gap"], 4) if "gap" in r else None,
                         "lp_s": round(stages[-1]["seconds"], 1) if stages else None,
                         "cpu_s": round(r["cpu_s"], 1) if "cpu_s" in r else None,
                         "wall_s": round(r["wall_s"], 1),
                         "peak_mb": round(r["peak_mb"]) if "peak_mb" in r else None,
                         "load": round(r["load"], 2),
                         "sha256": r.get("sha256", "")[:12]})
        done = [r for r in results if "cpu_s" in r]
        if done:
            notes.append(
                f"{name} ({what}): {len(done)} of {len(results)} runs wrote a plan; median "
                f"CPU {statistics.median(r['cpu_s'] for r in done):.1f} s, wall "
                f"{statistics.median(r['wall_s'] for r in done):.1f} s, worst peak "
                f"{max(r['peak_mb'] for r in done):.0f} MB; "
                f"{len({r.get('sha256') for r in done})} distinct plan.json")
        else:
            notes.append(f"{name} ({what}): no run wrote a plan")
    if args.code is not None:
        notes.append(f"run with the planner of another checkout (--code {args.code})")
    print("\n".join(notes))
    columns = [{"key": "case", "label": "case"}, {"key": "what", "label": "what"},
               {"key": "limits", "label": "limits"},
               {"key": "run", "label": "run"}, {"key": "periods", "label": "periods"},
               {"key": "projects", "label": "projects"}, {"key": "clusters", "label": "clusters"},
               {"key": "status", "label": "status"},
               {"key": "gap_pct", "label": "gap %", "unit": "%", "better": "lower"},
               {"key": "lp_s", "label": "elastic LP s (HiGHS)", "unit": "s", "better": "lower"},
               {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
               {"key": "wall_s", "label": "wall s", "unit": "s", "better": "lower"},
               {"key": "peak_mb", "label": "peak MB", "unit": "MB", "better": "lower"},
               {"key": "load", "label": "load (1 min, at the end)"},
               {"key": "sha256", "label": "plan.json SHA-256 (first 12)"}]
    write_result(args.name, title=f"Planning at 100× and on hourly grids ({args.limits} limits)",
                 what=(f"Fresh planning processes (benchmarks/one_run.py, default model, "
                       f"solver.limits = {args.limits}) on the generated sample at 100× "
                       "(daily and on a mixed grid) and on uniform hourly grids; CPU and wall "
                       "seconds, peak memory, the solver's status and gap"),
                 columns=columns, rows=rows, notes=notes, load_before=load_before)


if __name__ == "__main__":
    main()
