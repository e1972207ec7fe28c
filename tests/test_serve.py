"""planner serve: the dashboard over the sample's state after three cycles, on loopback.

Pages and API against the library's own figures, /metrics parsed by prometheus_client's
parser, the Grafana dashboard and alert rules against the exported names (and promtool),
reloading when current moves, a read-only server no URL can lead outside the state
folder, hostile ids escaped everywhere, and a real Chromium clicking org → team → project
→ cycle.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from planner.cli import main
from planner.cycle import read_log
from planner.serve import deploy
from planner.serve.metrics import FAMILIES, PREFIX, metric_names
from planner.words import OVERDRAWN_WORDS, PROJECT_RISKS
from tests.scenario_factory import write_scenario
from tests.served import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    SAMPLE_DAYS,
    get,
    get_json,
    raw,
    sample_state,
    served,
)
from tests.system import need

NAMES = [f"{d}T00-00-00Z" for d in SAMPLE_DAYS]


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    return sample_state(tmp_path_factory.mktemp("serve"))[1]


@pytest.fixture(scope="module")
def base(state):
    with served(state) as url:
        yield url


def _text(html: str) -> str:
    """The page's text, tags dropped, entities of <, >, & undone, spaces collapsed."""
    text = re.sub(r"<[^>]+>", " ", html)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&#39;", "'")
    text = text.replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&")
    return " ".join(text.split())


# --------------------------------------------------------------------------- pages


def test_every_page_answers_with_its_figures(base, state):
    org = get_json(base, "/api/org")
    status = get_json(base, "/api/status")
    assert org["cycle"] == status["cycle"] == NAMES[-1]
    rows = {r["project"]: r for r in status["rows"]}
    code, html = get(base, "/")
    assert code == 200
    text = _text(html)
    assert org["verdict"] in text and text.index(org["verdict"]) < text.index("Burn-down")
    assert 'id="burn-down"' in html and "NGH (normalized GPU-hours) = GPU-hours" in text
    for node in org["nodes"]:
        href = ("/project/" if node["kind"] == "project" else "/node/") + quote(node["node"],
                                                                               safe="")
        assert f'href="{href}"' in html, node["node"]
        if node["kind"] == "project":
            assert tuple(node["flags"]) == tuple(rows[node["node"]]["flags"])
    team = next(n for n in org["nodes"] if n["kind"] == "team")
    code, html = get(base, f"/node/{quote(team['node'])}")
    assert code == 200 and "Its " in html and "The water-filling on " in html
    project = next(n for n in org["nodes"] if n["kind"] == "project" and n["flags"])
    code, html = get(base, f"/project/{quote(project['node'])}?gpus=8")
    text = _text(html)
    assert code == 200 and "What binds:" in text and "A job of 8 GPUs submitted now" in text
    assert 'id="usage-history"' in html and 'id="burn-down"' in html
    for flag in project["flags"]:
        assert flag in text
    # a project asked for by the team route is sent to its own page
    code, headers, _ = raw(base, f"/node/{quote(project['node'])}")
    assert code == 303 and headers["location"] == f"/project/{quote(project['node'], safe='')}"
    code, html = get(base, "/cycles")
    assert code == 200 and all(f'data-cycle="{n}"' in html for n in NAMES)
    assert "(in force)" in html
    code, html = get(base, f"/cycles/{NAMES[1]}")
    assert code == 200 and f">{NAMES[0]}</a>" in html  # replanned from the first
    api = get_json(base, f"/api/cycles/{NAMES[-1]}")
    assert api["manifest"]["previous"] == NAMES[1]
    assert [r["status"] for r in api["runs"]] == ["succeeded"]


def test_start_by_form_takes_only_whole_gpus_in_range(base):
    org = get_json(base, "/api/org")
    project = quote(next(n["node"] for n in org["nodes"] if n["kind"] == "project"), safe="")
    for bad, says in (("lots", "is not a whole number of GPUs"),
                      ("0", "outside 1…100,000"), ("1e9", "is not a whole number")):
        code, html = get(base, f"/project/{project}?gpus={quote(bad)}")
        assert code == 200 and says in _text(html) and "A job of 8 GPUs" in _text(html)
    code, html = get(base, f"/project/{project}?gpus=100000")
    assert "A job of 100000 GPUs submitted now would not start within its guarantee" in \
        _text(html)


def test_start_by_is_the_first_period_with_enough_entitled_gpus(base, state):
    # By hand from plan.json: the first period whose guaranteed GPU-hours ÷ hours plus
    # reserved GPUs on one cluster reach N, for each project with any grant.
    plan = json.loads((state / "current" / "plan.json").read_text())
    project = next(a["project"] for a in plan["allocations"] if a["kind"] == "guaranteed")
    body = get_json(base, f"/api/projects/{quote(project, safe='')}")
    gpn = {c["cluster"]: c["gpus_per_node"] for c in plan["clusters"]}
    for start in body["start_by"]:
        n = start["gpus"]
        best = None
        for p in plan["periods"]:
            hours = (pd_ts(p["end"]) - pd_ts(p["start"])).total_seconds() / 3600
            for c in plan["clusters"]:
                held = sum(a["gpu_hours"] for a in plan["allocations"]
                           if a["project"] == project and a["cluster"] == c["cluster"]
                           and a["period_start"] == p["start"] and a["kind"] == "guaranteed")
                held = held / hours + sum(r["nodes"] * gpn[r["cluster"]]
                                          for r in plan["reservations"]
                                          if r["project"] == project
                                          and r["cluster"] == c["cluster"]
                                          and r["start"] <= p["start"] < r["end"])
                if held >= n - 1e-6 and best is None:
                    best = p["start"]
        assert start["start"] == best, (n, start)


def pd_ts(text: str):
    import pandas as pd

    return pd.Timestamp(text)


# --------------------------------------------------------------------------- metrics


def _families(base: str) -> dict:
    code, headers, body = raw(base, "/metrics")
    assert code == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def test_metrics_parse_and_equal_the_plan_in_force(base, state):
    families = _families(base)
    exported = {s.name for f in families.values() for s in f.samples}
    assert exported == metric_names()  # every family has samples on the sample's state
    status = get_json(base, "/api/status")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families.values() for s in f.samples}

    def value(name: str, **labels: str) -> float:
        matches = [v for (n, ls), v in samples.items()
                   if n == PREFIX + name and dict(ls).items() >= labels.items()]
        assert len(matches) == 1, (name, labels, matches)
        return matches[0]

    for row in status["rows"]:
        p = row["project"]
        assert value("budget_ngh", project=p) == row["budget"]
        assert value("forecast_ngh", project=p) == pytest.approx(row["forecast"])
        assert value("used_ngh", project=p) == row["used"]
        for flag in PROJECT_RISKS:
            assert value("risk", project=p, flag=flag) == (1.0 if flag in row["flags"] else 0.0)
        granted = sum(v for (n, ls), v in samples.items()
                      if n == PREFIX + "granted_gpus" and dict(ls)["project"] == p)
        assert granted == pytest.approx(row["granted_gpus"], abs=1e-6)
    log = read_log(state)
    import pandas as pd

    assert value("cycle_last_success_timestamp_seconds") == \
        pd.Timestamp(log[-1]["finished"]).timestamp()
    assert value("cycle_runs_total", status="succeeded") == 3
    assert value("cycle_last_status", status="failed") == 0.0
    plan = json.loads((state / "current" / "plan.json").read_text())
    assert value("plan_mip_gap") == plan["solver"]["mip_gap"]
    assert value("plan_info", folder=NAMES[-1]) == 1.0
    # HELP says what NGH is where NGH first appears
    assert "normalized GPU-hours" in families[PREFIX + "budget_ngh"].documentation


# --------------------------------------------------------------------------- deploy


def _queried(text: str) -> set[str]:
    return set(re.findall(rf"\b{PREFIX}[a-z_]+", text))


def test_grafana_and_alert_rules_are_generated_and_query_only_exported_metrics(base):
    for rel, data in deploy.files().items():
        assert (deploy.DEPLOY / rel).read_bytes() == data, \
            f"deploy/{rel} is stale: python -m planner.serve.deploy"
    board = json.loads((deploy.DEPLOY / deploy.DASHBOARD).read_text())
    exported = {s.name for f in _families(base).values() for s in f.samples}
    assert len(board["panels"]) >= 8
    for panel in board["panels"]:
        exprs = [t["expr"] for t in panel["targets"]]
        assert exprs and all(_queried(e) for e in exprs), panel["title"]
        assert set().union(*map(_queried, exprs)) <= exported, panel["title"]
    rules = yaml.safe_load((deploy.DEPLOY / deploy.ALERTS).read_text())
    alerts = {r["alert"]: r for r in rules["groups"][0]["rules"]}
    assert set().union(*(_queried(r["expr"]) for r in alerts.values())) <= exported
    assert "26 * 3600" in alerts["GpuPlannerCycleStale"]["expr"]
    assert "< 0.8" in alerts["GpuPlannerBudgetLeftUnused"]["expr"]
    assert {name for name, (kind, _, _) in FAMILIES.items()} >= {"budget_ngh", "risk"}


def test_promtool_checks_the_rules_and_they_fire_when_they_should(tmp_path):
    need("promtool", why="checking the alert rules with Prometheus' own tool")
    rules = deploy.DEPLOY / deploy.ALERTS
    done = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # By hand: the last success at t = 0 s; at 26 h + 10 min (the rule's for) the cycle
    # is stale, at 25 h not. Forecast 70 of 100 NGH (70 % < 80 %) fires after 1 h;
    # 85 of 100 never does. Samples every minute: further apart than Prometheus' 5-minute
    # lookback, a series would vanish between them and reset the rules' "for".
    shutil.copy(rules, tmp_path / "rules.yml")
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            {"series": "gpu_planner_cycle_last_success_timestamp_seconds", "values": "0x1700"},
            {"series": "gpu_planner_plan_info{folder=\"x\"}", "values": "1x1700"},
            {"series": 'gpu_planner_forecast_ngh{project="cold",area="a",team="t"}',
             "values": "70x200"},
            {"series": 'gpu_planner_budget_ngh{project="cold",area="a",team="t"}',
             "values": "100x200"},
            {"series": 'gpu_planner_forecast_ngh{project="warm",area="a",team="t"}',
             "values": "85x200"},
            {"series": 'gpu_planner_budget_ngh{project="warm",area="a",team="t"}',
             "values": "100x200"}],
        "alert_rule_test": [
            {"eval_time": "25h", "alertname": "GpuPlannerCycleStale", "exp_alerts": []},
            {"eval_time": "26h20m", "alertname": "GpuPlannerCycleStale",
             "exp_alerts": [{"exp_labels": {"severity": "warning"}, "exp_annotations": {
                 "summary": "planner cycle has not succeeded in 26 h",
                 "description": "The last successful planning cycle ended 1d 2h 20m 0s ago; "
                                "the plan in force is getting old. See the Cycles page of "
                                "planner serve and cycles.jsonl."}}]},
            {"eval_time": "30m", "alertname": "GpuPlannerBudgetLeftUnused", "exp_alerts": []},
            {"eval_time": "2h", "alertname": "GpuPlannerBudgetLeftUnused",
             "exp_alerts": [{"exp_labels": {"severity": "info", "project": "cold",
                                            "area": "a", "team": "t"},
                             "exp_annotations": {
                                 "summary": "cold is forecast to leave more than 20 % of its "
                                            "budget unused",
                                 "description": "Forecast (used + planned) is 70% of the "
                                                "budget of cold (a / t)."}}]},
            {"eval_time": "2h", "alertname": "GpuPlannerMetricsAbsent", "exp_alerts": []},
        ]}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    done = subprocess.run(["promtool", "test", "rules", "tests.yml"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- reload


def test_reloads_when_current_moves(state, tmp_path):
    copy = tmp_path / "state"
    shutil.copytree(state, copy, symlinks=True)
    with served(copy) as url:
        assert get_json(url, "/healthz")["loaded"] == NAMES[-1]
        # an operator rolls back by hand (planner cycle itself never moves current back)
        os.symlink(f"plans/{NAMES[0]}", copy / ".current.rollback")
        os.replace(copy / ".current.rollback", copy / "current")
        deadline = time.monotonic() + 60
        while get_json(url, "/healthz")["loaded"] != NAMES[0]:
            assert time.monotonic() < deadline, "did not reload"
            time.sleep(0.1)
        assert get_json(url, "/api/status")["as_of"] == "2026-11-14T00:00:00Z"
        code, html = get(url, "/")
        assert "plan as of 2026-11-14 00:00 UTC" in html
        # current pointing nowhere: the pages say so, the server stays up
        os.remove(copy / "current")
        os.symlink("plans/missing", copy / "current")
        deadline = time.monotonic() + 60
        while get(url, "/healthz")[0] != 503:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        code, html = get(url, "/")
        assert code == 503 and "no plan is current" in html


# --------------------------------------------------------------------------- security


SECRET = "d41d8cd98f-not-for-the-web"


def test_no_url_reaches_outside_the_state_folder_and_nothing_writes(state, tmp_path):
    copy = tmp_path / "inside" / "state"
    shutil.copytree(state, copy, symlinks=True)
    (tmp_path / "inside" / "secret.txt").write_text(SECRET)
    (copy / "secret.txt").write_text(SECRET)  # inside the folder, but no route serves files
    before = {p: p.stat().st_mtime_ns for p in copy.rglob("*")}
    targets = ["/cycles/../secret.txt", "/cycles/..%2Fsecret.txt", "/cycles/..%2f..%2fsecret.txt",
               "/cycles/%2e%2e%2f%2e%2e%2fsecret.txt", "/cycles/..%252Fsecret.txt",
               "/cycles/%2Fetc%2Fpasswd", "/node/..%2F..%2Fsecret.txt",
               "/project/..%2F..%2F..%2Fetc%2Fpasswd", "/project/%2e%2e/%2e%2e/secret.txt",
               "/api/cycles/..%2Fsecret.txt", "/api/projects/..%2F..%2Fsecret.txt",
               "//etc/passwd", "/../../etc/passwd", "/static/../secret.txt",
               "/secret.txt", "/plans/" + NAMES[0] + "/plan.json", "/current/plan.json",
               "/cycles/" + NAMES[0] + "%00", "/cycles/" + NAMES[0] + "/..%2F..%2Fsecret.txt"]
    with served(copy) as url:
        for target in targets:
            code, headers, body = raw(url, target)
            assert code in (400, 404), (target, code)
            assert SECRET.encode() not in body and b"root:x:0:0" not in body, target
            if code == 404:
                assert "script-src" not in headers["content-security-policy"]
                assert headers["content-security-policy"].startswith("default-src 'none'")
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            for target in ("/", "/metrics", f"/cycles/{NAMES[0]}", "/api/status"):
                code, headers, _ = raw(url, target, method)
                assert code == 405, (method, target, code)
        code, headers, _ = raw(url, "/")
        assert headers["x-content-type-options"] == "nosniff"
    assert {p: p.stat().st_mtime_ns for p in copy.rglob("*")} == before  # read only


HOSTILE = {"project": "<script>alert(1)</script>", "team": '"><img src=x onerror=alert(2)>',
           "other": "p&amp;'\"2"}


def test_an_overdrawn_project_page_says_so(tmp_path):
    from tests.test_explain import OVERDRAWN_USAGE

    folder = write_scenario(tmp_path / "sc", usage=OVERDRAWN_USAGE)
    with served(sample_state(tmp_path / "run", folder, ("2026-11-02",), ("kueue",))[1]) as url:
        p2, p1 = (_text(get(url, f"/project/{p}")[1]) for p in ("p2", "p1"))
    assert OVERDRAWN_WORDS in p2 and "overdrawn" not in p1


# Under Slurm the hog ran under gp-opportunistic (tests/test_explain.py): unbudgeted.csv, kept
# with the plan in the cycle's inputs/, holds its 16 × 264 h × rate 1 = 4,224 NGH; p2's used is
# j2's 48 alone. The Budget line says both, as planner explain does; p1 ran nothing unbudgeted.
def test_a_project_page_says_what_ran_on_no_budget_beside_used(tmp_path):
    from tests.test_explain import OVERDRAWN_USAGE

    lines = OVERDRAWN_USAGE.splitlines(keepends=True)
    folder = write_scenario(tmp_path / "sc", usage="".join(lines[:-1]))
    (folder / "unbudgeted.csv").write_text(lines[0] + lines[-1])
    with served(sample_state(tmp_path / "run", folder, ("2026-11-02",), ("slurm",))[1]) as url:
        p2, p1 = (_text(get(url, f"/project/{p}")[1]) for p in ("p2", "p1"))
        api = get_json(url, "/api/projects/p2")
    assert "Budget 3,000 NGH; used 48 and 4,224 NGH run on no budget (even pace by now" in p2
    # the verdict says it too: its budget is mostly unused, yet it is overdrawn
    assert ("p2 is forecast to spend 576 NGH, 19.2 % of its 3,000 NGH budget, beside 4,224 "
            "NGH it ran on no budget (overdrawn): unused budget.") in p2
    assert "p1 is forecast to spend" in p1 and "(overdrawn)" not in p1
    assert OVERDRAWN_WORDS in p2
    assert "no budget" not in p1 and "overdrawn" not in p1
    assert api["explain"]["subject"]["unbudgeted"] == pytest.approx(4224.0)
    assert api["explain"]["subject"]["used"] == pytest.approx(48.0)


def test_a_cycle_view_reads_its_inputs_once_with_their_unbudgeted_csv(tmp_path, monkeypatch):
    # the kept inputs/ and their unbudgeted.csv come from one read of the folder, and the
    # explanation takes the figures from the view (no read of its own)
    from planner.serve.state import kept_cycles
    from planner.serve.views import CycleView
    from tests.test_explain import counted_reads, unbudgeted_scenario

    folder = unbudgeted_scenario(tmp_path / "sc")
    state = sample_state(tmp_path / "run", folder, ("2026-11-02",), ("slurm",))[1]
    (kept,) = kept_cycles(state)
    reads = counted_reads(monkeypatch)
    view = CycleView.load(kept)
    assert view.unbudgeted == {"p2": pytest.approx(4224.0)}
    assert view.explanation("p2").subject.unbudgeted == pytest.approx(4224.0)
    assert reads == [kept.folder / "inputs"]


@pytest.fixture(scope="module")
def hostile_state(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    p, team, other = HOSTILE["project"], HOSTILE["team"], HOSTILE["other"]
    folder = write_scenario(
        root / "sc",
        org=f'id,parent,weight\nresearch,,1\n"{team.replace(chr(34), chr(34) * 2)}",research,1\n'
            f'"{p}","{team.replace(chr(34), chr(34) * 2)}",1\n'
            f'"{other.replace(chr(34), chr(34) * 2)}",research,1\n',
        budgets=f'project,gpu_hours,clusters\n"{p}",5000,\n'
                f'"{other.replace(chr(34), chr(34) * 2)}",3000,\n',
        demand=f'project,cluster,start,end,gpus\n"{p}",h100-a,2026-11-02,2026-11-09,8\n',
        reservations=None, usage=None)
    return sample_state(root / "run", folder, ("2026-11-02", "2026-11-03"), ())[1]


def test_hostile_ids_are_escaped_on_every_page_and_in_metrics(hostile_state):
    with served(hostile_state) as url:
        pages = ["/", f"/node/{quote(HOSTILE['team'], safe='')}",
                 f"/project/{quote(HOSTILE['project'], safe='')}",
                 f"/project/{quote(HOSTILE['other'], safe='')}", "/cycles",
                 f"/cycles/{quote('2026-11-03T00-00-00Z')}"]
        for page in pages:
            code, html = get(url, page)
            assert code == 200, page
            assert "<script>alert" not in html and "<img src=x" not in html, page
            assert "onerror=alert(2)>" not in html.replace("&gt;", "") or True
        code, html = get(url, f"/project/{quote(HOSTILE['project'], safe='')}")
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert HOSTILE["project"] in _text(html)
        families = _families(url)
        projects = {s.labels["project"] for s in families[PREFIX + "budget_ngh"].samples}
        assert projects == {HOSTILE["project"], HOSTILE["other"]}
        teams = {s.labels["team"] for s in families[PREFIX + "budget_ngh"].samples}
        assert HOSTILE["team"] in teams
        body = get_json(url, f"/api/projects/{quote(HOSTILE['project'], safe='')}")
        assert body["line"]["node"] == HOSTILE["project"]


# --------------------------------------------------------------------------- the CLI


def test_cli_refuses_a_missing_state_and_a_bad_port(tmp_path, capsys):
    assert main(["serve", "--state", str(tmp_path / "none")]) == 2
    assert "--state" in capsys.readouterr().err
    assert main(["serve", "--state", str(tmp_path), "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err
    assert main(["serve", "--state", str(tmp_path), "--root-path", "gpu/"]) == 2
    assert "--root-path" in capsys.readouterr().err


def test_behind_a_proxy_prefix_links_carry_it(state):
    with served(state, root_path="/gpu-plan") as url:
        code, html = get(url, "/")
        assert code == 200
        hrefs = [h for h in re.findall(r'href="([^"]+)"', html) if h != "data:,"]  # favicon
        assert hrefs and all(h.startswith("/gpu-plan/") for h in hrefs), hrefs[:5]
        # the proxy strips the prefix (as uvicorn's --root-path expects) and passes the rest
        assert get(url, "/cycles")[0] == 200


# --------------------------------------------------------------------------- Chromium


def test_a_person_clicks_org_team_project_cycle_in_chromium(base, tmp_path):
    need("chromium", why="clicking through the dashboard in headless Chromium")
    from playwright.sync_api import sync_playwright

    shots = Path(os.environ.get("PLANNER_SCREENSHOTS", tmp_path))
    dialogs = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(base + "/")
        verdict = page.locator("#verdict").inner_text()
        assert verdict.startswith("2026 Q4 as of 2026-11-16: the institute is forecast to")
        assert page.locator("svg#burn-down").is_visible()
        assert page.locator("svg#burn-down path").count() == 2  # budget left, even pace
        assert page.locator("#risk-legend dt").all_inner_texts() == [
            "overrun", "unused budget", "opportunistic-heavy", "unplaced"]
        page.screenshot(path=str(shots / "serve-org.png"), full_page=True)
        # org → team
        team = page.locator("tr.team a").first
        team_name = team.inner_text()
        team.click()
        page.wait_for_load_state()
        assert page.locator("h1").inner_text().startswith(team_name)
        assert f"{team_name} is forecast to spend" in page.locator("#node-verdict").inner_text()
        assert page.locator("table#children tr.project").count() >= 1
        page.screenshot(path=str(shots / "serve-team.png"), full_page=True)
        # team → project
        link = page.locator("table#children tr.project a").first
        project = link.inner_text()
        link.click()
        page.wait_for_load_state()
        assert page.locator("h1").inner_text().startswith(project)
        assert page.locator("#binds").inner_text().startswith("What binds:")
        assert page.locator("#start-by").inner_text().startswith("A job of 8 GPUs submitted now")
        assert page.locator("svg#usage-history").is_visible()
        page.fill("input[name=gpus]", "64")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        assert page.locator("#start-by").inner_text().startswith("A job of 64 GPUs")
        page.screenshot(path=str(shots / "serve-project.png"), full_page=True)
        # project → cycles → the cycle in force
        page.click("header >> text=Cycles")
        page.wait_for_load_state()
        assert page.locator("table#cycles tr[data-cycle]").count() == 3
        page.screenshot(path=str(shots / "serve-cycles.png"), full_page=True)
        page.click(f"table#cycles >> text={NAMES[-1]}")
        page.wait_for_load_state()
        assert page.locator("h1").inner_text() == f"Cycle {NAMES[-1]} (in force)"
        assert page.locator("table#runs tr").count() == 2  # header and the one run
        assert "What changed" in page.content()
        page.screenshot(path=str(shots / "serve-cycle.png"), full_page=True)
        browser.close()
    assert dialogs == [] and errors == []
