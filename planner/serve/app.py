"""The dashboard: a read-only Starlette app over a ``planner cycle`` state folder.

Pages (server-rendered HTML, jinja2 with autoescape, charts as inline SVG, no script):

- ``/``: the Org page, the quarter's verdict, a burn-down, every area → team → project;
- ``/node/{id}``: an area or team, its burn-down, its children, its water-filling;
- ``/project/{id}``: ``planner explain`` as a page, its reservations on a calendar, its
  usage by day from the ledger, and when an N-GPU job submitted now would start;
- ``/cycles`` and ``/cycles/{name}``: each cycle's time, status, seconds, gap, warnings,
  and what it changed;
- ``/metrics`` (Prometheus), ``/api/…`` (the same data as JSON), ``/healthz``.

Read-only by construction: only ``GET`` (and ``HEAD``) routes; ids in URLs are looked up
in the plan's own dictionaries, cycle names in the listing of ``DIR/plans``
(:mod:`planner.serve.state`), never joined to a path. Every response carries a
``Content-Security-Policy`` that allows no script at all.

The plan in force reloads when ``current`` moves: each request compares the link with
the one loaded (a ``readlink``); a new view is built in a thread and swapped in when
ready, the old one serving meanwhile. Once swapped in, a thread explains every area, team
and project of the new plan (``/healthz`` counts them), so pages do not wait for that.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
import pandas as pd
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from planner.serve import svg
from planner.serve.metrics import cycle_exposition, plan_exposition
from planner.serve.state import Kept, current_name, kept_cycles, link_stamp, log_stamp, runs
from planner.serve.views import CycleView, changes
from planner.words import (
    OVERDRAWN_WORDS,
    RISKS,
    legend_lines,
    number,
    percent,
    unbudgeted_words,
    water_level_words,
)

TEMPLATES = ("planner", "templates/serve")
MAX_GPUS = 100_000  # the largest N the start-by form accepts
PAGE_CACHE = 512  # rendered pages of the plan in force kept (its figures never change)
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src 'self' data:; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class PageCache:
    """Responses of the plan in force by (plan, prefix, path, query), at most ``size``.

    The least recently used go first. A plan's pages never change; a new plan has a new name.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, ...], Response] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> Response | None:
        """The response kept under ``key``, or None."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[str, ...], response: Response) -> None:
        """Keep a successful response (errors are not kept)."""
        if response.status_code != 200:
            return
        with self._lock:
            self._items[key] = response
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class Live:
    """The state folder as the app sees it: the view of the plan in force, kept fresh."""

    def __init__(self, state: Path) -> None:
        self.state = Path(state)
        self.view: CycleView | None = None
        self.loaded_link: str | None = None
        self.loading = False
        self.error: str | None = None
        self._lock = threading.Lock()
        self._cycles: tuple[tuple[Any, ...], tuple[Kept, ...], list[dict]] | None = None
        self._changes: dict[str, Any] = {}
        self.pages = PageCache(PAGE_CACHE)
        self._stop: threading.Event | None = None

    # ------------------------------------------------------------------ the plan in force

    def refresh(self, wait: bool = False) -> None:
        """Load the plan ``current`` points at when it moved (``wait``: before returning)."""
        link, _ = link_stamp(self.state)
        with self._lock:
            if link == self.loaded_link or self.loading:
                return
            self.loading = True
        if wait or self.view is None:
            self._load(link)
        else:
            threading.Thread(target=self._load, args=(link,), daemon=True).start()

    def _load(self, link: str | None) -> None:
        try:
            name = current_name(self.state)
            kept = {k.name: k for k in kept_cycles(self.state)}.get(name) if name else None
            view = CycleView.load(kept) if kept is not None else None
            if view is not None and view.usable:
                warm(view)
            error = None if kept is not None else "no plan is current yet (run planner cycle)"
        except Exception as exc:  # a damaged folder must not take the dashboard down
            view, error = None, f"the plan in force could not be read: {exc}"
        with self._lock:
            if view is not None or error:
                if self._stop is not None:
                    self._stop.set()  # the plan it explained is no longer in force
                self.view, self.error = view, error
                if view is not None and view.usable:
                    self._stop = threading.Event()
                    threading.Thread(target=view.explain_all, args=(self._stop,),
                                     daemon=True).start()
            self.loaded_link = link
            self.loading = False

    def current(self) -> CycleView | None:
        """The view of the plan in force (refreshed first)."""
        self.refresh()
        return self.view

    # ------------------------------------------------------------------ history

    def cycles(self) -> tuple[tuple[Kept, ...], list[dict[str, Any]]]:
        """The kept cycles and the run log (cached until either changes)."""
        plans = self.state / "plans"
        try:
            stamp = (plans.stat().st_mtime_ns, log_stamp(self.state))
        except OSError:
            stamp = (None, log_stamp(self.state))
        cached = self._cycles
        if cached is None or cached[0] != stamp:
            cached = (stamp, kept_cycles(self.state), runs(self.state))
            self._cycles = cached
        return cached[1], cached[2]

    def cycle_changes(self, kept: Kept, by_name: dict[str, Kept]) -> Any:
        """What ``kept`` changed against the plan it replanned (kept folders never change)."""
        if kept.name not in self._changes:
            from planner.serve.state import read_plan

            previous = by_name.get(kept.manifest.get("previous") or "")
            plan = read_plan(kept.folder)
            self._changes[kept.name] = (plan, changes(plan, read_plan(previous.folder)
                                                      if previous else None))
        return self._changes[kept.name]

    def metrics(self) -> bytes:
        """The ``/metrics`` text: the plan's families (kept per plan), then the run log's."""
        view = self.current()
        _, moved = link_stamp(self.state)
        plan = view.metrics_text if view is not None and view.usable else plan_exposition(None)
        return plan + cycle_exposition(self.cycles()[1], moved)


def warm(view: CycleView) -> None:
    """Compute what every page needs before the view is swapped in."""
    _ = view.lines, view.verdict, view._spend, view._daily, view._entitled, view._running_on
    _ = view.context, view.metrics_text


# --------------------------------------------------------------------------- rendering


def environment() -> jinja2.Environment:
    """The pages' templates: autoescape on, strict undefined."""
    env = jinja2.Environment(loader=jinja2.PackageLoader(*TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.globals.update(n=number, pct=percent, legend=RISKS, lam_words=water_level_words,
                       overdrawn_words=OVERDRAWN_WORDS, unbudgeted_words=unbudgeted_words,
                       q=lambda text: quote(str(text), safe=""))
    env.filters["when"] = when
    return env


def when(text: Any) -> str:
    """``2026-11-16 00:00 UTC`` for an ISO time (seconds shown only when not 0)."""
    try:
        stamp = pd.Timestamp(str(text))
    except ValueError:
        return str(text)
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC")
    return stamp.strftime("%Y-%m-%d %H:%M:%S UTC" if stamp.second else "%Y-%m-%d %H:%M UTC")


def _page(env: jinja2.Environment, request: Request, name: str, status: int = 200,
          **context: Any) -> HTMLResponse:
    root = request.scope.get("root_path", "").rstrip("/")
    return HTMLResponse(env.get_template(name).render(root=root, **context),
                        status_code=status, headers=SECURITY_HEADERS)


def _json(body: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=SECURITY_HEADERS)


def _jsonable(value: Any) -> Any:
    """Dataclasses, tuples, timestamps and NaN-free floats as JSON values."""
    from dataclasses import asdict, is_dataclass

    if is_dataclass(value):
        return _jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def create_app(state: Path | str) -> Starlette:
    """The app over the state folder ``state`` (loads the plan in force first)."""
    live = Live(Path(state))
    live.refresh(wait=True)
    env = environment()

    def not_found(request: Request, what: str) -> HTMLResponse:
        return _page(env, request, "error.html.j2", 404, title="Not found", message=what)

    def need_view(render: Callable[[Request, CycleView], Response]
                  ) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            view = live.current()
            if view is None or not view.usable:
                why = (view.problem if view is not None else live.error) or "nothing loaded"
                if request.url.path.startswith("/api/"):
                    return _json({"error": why}, 503)
                return _page(env, request, "error.html.j2", 503, title="No plan to show",
                             message=why)
            key = (view.name, request.scope.get("root_path", ""), request.url.path,
                   request.url.query)
            cached = live.pages.get(key)
            if cached is not None:
                return cached
            response = render(request, view)
            live.pages.put(key, response)
            return response
        return endpoint

    def org(request: Request, view: CycleView) -> Response:
        return _page(env, request, "org.html.j2", view=view, lines=view.lines,
                     chart=institute_chart(view), legend_text=legend_lines())

    def node(request: Request, view: CycleView) -> Response:
        node_id = request.path_params["node"]
        line = view.line_of.get(node_id)
        if line is None:
            return not_found(request, f"no area, team or project {node_id!r} in the plan in force")
        if line.kind == "project":
            root = request.scope.get("root_path", "").rstrip("/")
            return RedirectResponse(f"{root}/project/{quote(node_id, safe='')}", 303,
                                    headers=SECURITY_HEADERS)
        tree = view.scenario.tree
        kids = [view.line_of[c] for c in tree.children_of(node_id)]
        return _page(env, request, "node.html.j2", view=view, line=line, kids=kids,
                     path=tree.path(node_id), why=view.explanation(node_id),
                     chart=svg.burn_down(view.burn(node_id), "burn-down",
                                         f"{node_id}: budget left against the even pace"))

    def project(request: Request, view: CycleView) -> Response:
        pid = request.path_params["project"]
        line = view.line_of.get(pid)
        if line is None or line.kind != "project":
            return not_found(request, f"no project {pid!r} in the plan in force")
        gpus, problem = _gpus(request.query_params.get("gpus"))
        plan = view.plan
        booked = view.reservations(pid)
        return _page(env, request, "project.html.j2", view=view, line=line,
                     path=view.scenario.tree.path(pid), why=view.explanation(pid),
                     row=next(r for r in view.status.rows if r.project == pid),
                     start=view.start_by(pid, gpus), gpus=gpus, gpus_problem=problem,
                     running=view.running_on(pid), booked=booked,
                     unplaced=view.unplaced(pid),
                     calendar=svg.calendar(booked, pd.Timestamp(plan["quarter_start"]),
                                           pd.Timestamp(plan["quarter_end"]),
                                           pd.Timestamp(plan["as_of"]), "calendar",
                                           f"{pid}: reservations"),
                     usage=svg.usage_bars(view.history(pid), "usage-history",
                                          f"{pid}: NGH a day"),
                     chart=svg.burn_down(view.burn(pid), "burn-down",
                                         f"{pid}: budget left against the even pace"))

    def cycles_page(request: Request) -> Response:
        rows, failed = cycle_rows(live)
        return _page(env, request, "cycles.html.j2", rows=rows, failed=failed,
                     current=current_name(live.state))

    def cycle_page(request: Request) -> Response:
        name = request.path_params["name"]
        kept, records = live.cycles()
        by_name = {k.name: k for k in kept}
        if name not in by_name:
            return not_found(request, f"no kept cycle {name!r}")
        plan, changed = live.cycle_changes(by_name[name], by_name)
        return _page(env, request, "cycle.html.j2", kept=by_name[name], plan=plan, changed=changed,
                     runs=[r for r in records if r.get("folder") == name],
                     current=current_name(live.state))

    def metrics(request: Request) -> Response:
        return Response(live.metrics(),
                        media_type="text/plain; version=0.0.4; charset=utf-8",
                        headers=SECURITY_HEADERS)

    def healthz(request: Request) -> Response:
        view = live.current()
        ok = view is not None and view.usable
        return _json({"ok": ok, "current": current_name(live.state),
                      "loaded": view.name if view is not None else None,
                      "loading": live.loading,
                      "explained": [view.explained, len(view.lines)] if ok else None,
                      "problem": None if ok else (
                          view.problem if view is not None else live.error)},
                     200 if ok else 503)

    def api_status(request: Request, view: CycleView) -> Response:
        return _json({"cycle": view.name, "verdict": view.verdict, "ngh": view.ngh,
                      **_jsonable(view.status.as_json())})

    def api_org(request: Request, view: CycleView) -> Response:
        return _json({"cycle": view.name, "verdict": view.verdict,
                      "nodes": _jsonable(list(view.lines))})

    def api_project(request: Request, view: CycleView) -> Response:
        pid = request.path_params["project"]
        line = view.line_of.get(pid)
        if line is None or line.kind != "project":
            return _json({"error": f"no project {pid!r}"}, 404)
        why = view.explanation(pid)
        return _json({"cycle": view.name, "line": _jsonable(line),
                      "explain": why.as_json() if why is not None else None,
                      "reservations": view.reservations(pid), "unplaced": view.unplaced(pid),
                      "start_by": [_jsonable(view.start_by(pid, n)) for n in (1, 8, 64)]})

    def api_cycles(request: Request) -> Response:
        rows, failed = cycle_rows(live)
        return _json({"current": current_name(live.state), "cycles": _jsonable(rows),
                      "failed_runs": failed})

    def api_cycle(request: Request) -> Response:
        name = request.path_params["name"]
        kept, records = live.cycles()
        by_name = {k.name: k for k in kept}
        if name not in by_name:
            return _json({"error": f"no kept cycle {name!r}"}, 404)
        _, changed = live.cycle_changes(by_name[name], by_name)
        return _json({"name": name, "manifest": by_name[name].manifest,
                      "changes": _jsonable(list(changed)),
                      "runs": [r for r in records if r.get("folder") == name]})

    routes = [
        Route("/", need_view(org), name="org"),
        Route("/node/{node:path}", need_view(node), name="node"),
        Route("/project/{project:path}", need_view(project), name="project"),
        Route("/cycles", cycles_page, name="cycles"),
        Route("/cycles/{name}", cycle_page, name="cycle"),
        Route("/metrics", metrics, name="metrics"),
        Route("/healthz", healthz, name="healthz"),
        Route("/api/status", need_view(api_status), name="api_status"),
        Route("/api/org", need_view(api_org), name="api_org"),
        Route("/api/projects/{project:path}", need_view(api_project), name="api_project"),
        Route("/api/cycles", api_cycles, name="api_cycles"),
        Route("/api/cycles/{name}", api_cycle, name="api_cycle"),
    ]

    async def on_404(request: Request, exc: Exception) -> Response:
        return not_found(request, "no such page")

    async def on_405(request: Request, exc: Exception) -> Response:
        return Response("read-only: only GET\n", 405, headers={**SECURITY_HEADERS,
                                                                "Allow": "GET, HEAD"})

    app = Starlette(routes=routes, exception_handlers={404: on_404, 405: on_405})
    app.state.live = live
    return app


def _gpus(text: str | None) -> tuple[int, str | None]:
    """The N of the start-by form (default 8), and what was wrong with the text given."""
    if text is None or text == "":
        return 8, None
    try:
        value = int(text)
    except ValueError:
        return 8, f"{text!r} is not a whole number of GPUs; showing 8"
    if not 1 <= value <= MAX_GPUS:
        return 8, f"{value} GPUs is outside 1…{MAX_GPUS:,}; showing 8"
    return value, None


def institute_chart(view: CycleView) -> Any:
    """The institute's burn-down: every area's budget left, summed, against the even pace."""
    burns = [view.burn(a.node) for a in view.report.areas]
    total = {"times": burns[0]["times"], "as_of": burns[0]["as_of"],
             "left": [sum(b["left"][i] for b in burns) for i in range(len(burns[0]["left"]))],
             "pace": [sum(b["pace"][i] for b in burns) for i in range(len(burns[0]["pace"]))],
             "budget": sum(b["budget"] for b in burns)}
    return svg.burn_down(total, "burn-down", "The institute: budget left against the even pace")


def cycle_rows(live: Live) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One row per kept cycle, newest first, and the failed runs, newest first."""
    kept, records = live.cycles()
    by_name = {k.name: k for k in kept}
    last_run: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("folder"):
            last_run.setdefault(r["folder"], r)  # the first run that kept it
    rows = []
    for k in reversed(kept):
        plan, changed = live.cycle_changes(k, by_name)
        run = last_run.get(k.name, {})
        rows.append({"name": k.name, "as_of": k.as_of, "previous": k.manifest.get("previous"),
                     "model": k.manifest.get("model"), "exports": k.manifest.get("exports", []),
                     "solver": plan["solver"]["name"], "solver_status": plan["solver"]["status"],
                     "gap": plan["solver"]["mip_gap"], "ran": run.get("finished"),
                     "seconds": run.get("seconds"), "cpu_seconds": run.get("cpu_seconds"),
                     "warnings": run.get("warnings", []), "changes": len(changed),
                     "unplaced": len(plan["unplaced"])})
    failed = [r for r in reversed(records) if r.get("status") == "failed"]
    return rows, failed


def serve(state: Path, host: str = "127.0.0.1", port: int = 8080, root_path: str = "",
          ready: Callable[[str], None] | None = None) -> None:
    """Run the dashboard with uvicorn until interrupted."""
    import uvicorn

    started = time.perf_counter()
    app = create_app(state)
    if ready is not None:
        ready(f"loaded {app.state.live.view.name if app.state.live.view else 'nothing'} in "
              f"{time.perf_counter() - started:.1f} s; serving http://{host}:{port}/ "
              "(read-only; Ctrl-C stops)")
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False,
                root_path=root_path, proxy_headers=False)


def dumps(body: Any) -> str:
    """JSON text of an API body (for tests and scripts)."""
    return json.dumps(_jsonable(body), ensure_ascii=False)
