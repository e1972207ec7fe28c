"""Every id a user writes is hostile: through every exporter and report it stays inert data.

One scenario whose ids hold ``$(touch MARK)``, backticks, ``;``, newlines, spaces, quotes,
``=HYPERLINK(...)``, ``<script>`` and control characters (and an org node called ``root``)
is refused by ``planner run`` (control characters are refused at validation: exit 2, nothing
written). The same scenario with those characters spelt as placeholders is planned with
``planner run --export kueue,slurm,json`` (every other hostile id end to end through the CLI);
its plan, with the placeholders turned back into newlines and control characters, goes through
every exporter as a hand-edited plan would (defence in depth: the exporters never rely on
validation). Then the Slurm script runs under bash against the fake Slurm (and with
``--dry-run``), the Kueue YAML and the executor JSON are parsed back, and both reports are
written and read back. MARK must never exist, and the ids come back exactly where an id is
data (annotations, JSON, report cells).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import openpyxl
import pytest
import yaml

from planner.cli import main
from planner.exporters.common import safe_name
from planner.exporters.files import export_files
from planner.exporters.kueue import export_kueue, prune_selector
from planner.exporters.slurm import account, reservation_name
from planner.inputs.load import load_scenario
from planner.plan.write import write_files
from tests.scenario_factory import FILES, write_scenario
from tests.test_export_kueue import needs_crds, validate
from tests.test_export_slurm import FakeSlurm


def hostile_ids(marker: Path) -> dict[str, str]:
    """The tiny scenario's ids -> hostile ones (each would touch ``marker`` if run)."""
    return {
        "research": "root",
        "vision": "vision team; touch " + str(marker),
        "language": f"`touch {marker}`",
        "p1": f"$(touch {marker})",
        "p2": "it's \"quoted\"\nsecond line",
        "p3": '=HYPERLINK("http://evil.example/","click")',
        "p4": "<script>alert(1)</script>\x01\x1f",
        "r1": f"r1 $(touch {marker})",
        "r2": "r2\n'; touch x",
    }


def _rewrite(text: str, ids: dict[str, str], columns: set[str]) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(rows[0])
    for row in rows[1:]:
        writer.writerow([ids.get(cell, cell) if name in columns else cell
                         for name, cell in zip(rows[0], row, strict=True)])
    return out.getvalue()


#: characters validation refuses in ids and names, and how the planable scenario spells them
PLACEHOLDERS = {"\n": "@NL@", "\x01": "@X01@", "\x1f": "@X1F@"}


def planable(text: str) -> str:
    for char, token in PLACEHOLDERS.items():
        text = text.replace(char, token)
    return text


def hostile(value):
    """Placeholders back into the characters they spell, in every string of ``value``."""
    if isinstance(value, str):
        for char, token in PLACEHOLDERS.items():
            value = value.replace(token, char)
        return value
    if isinstance(value, list):
        return [hostile(v) for v in value]
    if isinstance(value, dict):
        return {hostile(k): hostile(v) for k, v in value.items()}
    return value


def hostile_scenario(folder: Path, marker: Path, spell=lambda text: text) -> Path:
    """The tiny scenario with :func:`hostile_ids` (each through ``spell``); name and labels too."""
    ids = {k: spell(v) for k, v in hostile_ids(marker).items()}
    columns = {"id", "parent", "project", "request_id"}
    overrides = {name: _rewrite(FILES[name], ids, columns)
                 for name in ("org", "budgets", "demand", "reservations", "usage")}
    name = spell("tiny\n").replace("\n", "\\n")  # TOML: a newline is written \n
    overrides["scenario"] = FILES["scenario"].replace(
        'name = "tiny"', f'name = "{name}$(touch {marker})"')
    overrides["clusters"] = ("cluster,gpu_type,nodes,gpus_per_node,node_labels\n"
                             "h100-a,H100,4,8,nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n"
                             "a100-b,A100,2,8,\n")
    return write_scenario(folder, **overrides)


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """The hostile plan exported to every target: (root, marker, ids).

    ``root/scenario`` and ``root/out`` hold the planable scenario and its CLI run;
    ``root/hostile/plan.json`` and ``root/hostile/<target>/`` the plan with every hostile
    character back, exported through the library as a hand-edited plan would be.
    """
    root = tmp_path_factory.mktemp("hostile")
    marker = root / "MARK"
    refused = hostile_scenario(root / "refused", marker)
    assert main(["run", str(refused), "--out", str(root / "refused-out"), "--quiet",
                 "--export", "kueue,slurm,json"]) == 2
    assert not (root / "refused-out").exists()
    scenario = hostile_scenario(root / "scenario", marker, planable)
    assert main(["run", str(scenario), "--out", str(root / "out"), "--quiet",
                 "--export", "kueue,slurm,json"]) == 0
    plan = hostile(json.loads((root / "out" / "plan.json").read_text()))
    org = load_scenario(scenario).org.copy()
    org["id"], org["parent"] = org["id"].map(hostile), org["parent"].map(hostile)
    write_files(root / "hostile", {"plan.json": json.dumps(plan).encode()})
    for target in ("kueue", "slurm", "json"):
        write_files(root / "hostile" / target, export_files(plan, target, org))
    assert not marker.exists()
    return root, marker, hostile_ids(marker)


def projects(ids: dict[str, str]) -> set[str]:
    return {ids[p] for p in ("p1", "p2", "p3", "p4")}


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_slurm_script_runs_hostile_ids_inert_against_the_fake(planned, tmp_path):
    root, marker, ids = planned
    script = (root / "hostile" / "slurm" / "slurm-apply.sh").read_text()
    plan = json.loads((root / "hostile" / "plan.json").read_text())
    assert plan["scenario"] == f"tiny\n$(touch {marker})"
    # the header comment cannot be escaped: every line before the preamble is a comment
    head = script[:script.index("\nset -eu\n")].splitlines()
    assert all(line.startswith("#") for line in head)
    assert f"tiny\\n$(touch {marker})" in head[1]

    slurm = FakeSlurm(tmp_path / "apply", partitions=["h100-a", "a100-b"])
    state = slurm.apply(script, "2026-11-01T12:00:00")
    assert not marker.exists() and not Path("x").exists()
    # every org node is an account under its derived name, none of them Slurm's root
    org = {ids.get(n, n) for n in ("research", "vision", "language", "p1", "p2", "p3", "p4")}
    assert set(state["account"]) == {account(n) for n in org}
    assert account("root") != "root" and state["account"][account("root")]["parent"] == "root"
    for node in org:
        got = state["account"][account(node)]["description"]
        assert got.isprintable() and got.isascii() and "|" not in got
    p2 = state["account"][account(ids["p2"])]["description"]
    assert p2 == "org:it?s ?quoted??second line"
    # reservations: gp- names, for the derived accounts
    placed = {r["request_id"]: r for r in plan["reservations"]}
    assert set(placed) == {ids["r1"], ids["r2"]}
    assert set(state["reservation"]) == {reservation_name(i) for i in placed}
    for rid, r in placed.items():
        got = state["reservation"][reservation_name(rid)]
        assert reservation_name(rid).startswith("gp-")
        assert (got["Accounts"], got["PartitionName"]) == (account(r["project"]), r["cluster"])
    # a second run converges, and nothing ran the ids either
    assert slurm.apply(script, "2026-11-01T12:00:00") == state
    assert not marker.exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_slurm_dry_run_prints_every_change_and_makes_none(planned, tmp_path):
    root, marker, ids = planned
    script = (root / "hostile" / "slurm" / "slurm-apply.sh").read_text()
    for how in ("flag", "env"):
        slurm = FakeSlurm(tmp_path / how, partitions=["h100-a", "a100-b"])
        if how == "env":
            slurm.env["DRY_RUN"] = "1"
            state = slurm.apply(script, "2026-11-01T12:00:00")
        else:
            state = slurm.apply(script, "2026-11-01T12:00:00", "--dry-run")
        assert state.get("account", {}) == {} and state.get("reservation", {}) == {}
        # only the read-only guards reached Slurm
        assert all(argv[1] in ("show", "-n") or argv[1:3] == ["-o", "show"]
                   for argv in slurm.argvs()), slurm.argvs()
        printed = [line for line in slurm.output.splitlines() if line.startswith("would run:")]
        assert printed == slurm.output.splitlines()
        # each change, quoted as bash reads it back: the hostile description is one word
        adds = [line for line in printed if " add account " in line]
        assert len(adds) == 7
        assert any(account(ids["p1"]) in line for line in adds)
        assert sum("scontrol create reservation" in line for line in printed) == 2
        assert not marker.exists()
    # once applied, a dry run has nothing left to print
    slurm = FakeSlurm(tmp_path / "applied", partitions=["h100-a", "a100-b"])
    slurm.apply(script, "2026-11-01T12:00:00")
    slurm.apply(script, "2026-11-01T12:00:00", "--dry-run")
    assert slurm.output == ""
    with pytest.raises(AssertionError):  # anything else is refused
        FakeSlurm(tmp_path / "bad").apply(script, None, "--now")


@needs_crds
def test_kueue_yaml_carries_hostile_ids_as_data(planned):
    root, marker, ids = planned
    folder = root / "hostile" / "kueue"
    index = yaml.safe_load((folder / "index.yaml").read_text())
    (entry,) = index["periods"]
    docs = [d for d in yaml.safe_load_all((folder / entry["file"]).read_text()) if d]
    plan = json.loads((root / "hostile" / "plan.json").read_text())
    for obj in docs:
        validate(obj)
        assert obj["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "gpu-planner",
            "gpu-planner.io/scenario": obj["metadata"]["labels"]["gpu-planner.io/scenario"]}
    assert prune_selector(plan) == ",".join(
        f"{k}={v}" for k, v in docs[0]["metadata"]["labels"].items())
    queues = {d["metadata"]["annotations"]["gpu-planner.io/id"]: d for d in docs
              if d["kind"] == "ClusterQueue"}
    assert set(queues) == projects(ids)  # the ids, exactly, as annotations
    for project, queue in queues.items():
        assert queue["metadata"]["name"] == safe_name(project)
    cohorts = {d["metadata"]["annotations"]["gpu-planner.io/id"] for d in docs
               if d["kind"] == "Cohort"}
    assert {ids["research"], ids["vision"], ids["language"]} <= cohorts
    flavors = {d["metadata"]["name"]: d["spec"]["nodeLabels"] for d in docs
               if d["kind"] == "ResourceFlavor"}
    assert flavors == {"h100-a": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                       "a100-b": {"gpu-planner.io/cluster": "a100-b"}}
    assert not marker.exists()


def test_kueue_yaml_of_hostile_ids_is_the_bytes_pyyaml_writes(planned, monkeypatch):
    # hostile ids send their documents to PyYAML's Python emitter (libyaml writes some
    # of them otherwise): the export is what yaml.safe_dump_all writes, set by set
    from tests.test_export_kueue import reference_export

    root, marker, ids = planned
    plan = json.loads((root / "hostile" / "plan.json").read_text())
    org = load_scenario(root / "scenario").org.copy()
    org["id"], org["parent"] = org["id"].map(hostile), org["parent"].map(hostile)
    for per_cluster in (False, True):
        assert (export_kueue(plan, org, 2, per_cluster)
                == reference_export(monkeypatch, plan, org, 2, per_cluster))
    assert not marker.exists()


def test_executor_json_carries_hostile_ids_as_data(planned):
    root, marker, ids = planned
    view = json.loads((root / "hostile" / "json" / "executor-view.json").read_text())
    quoted = {q["project"] for p in view["periods"] for c in p["clusters"] for q in c["quotas"]}
    assert quoted <= projects(ids) and ids["p1"] in quoted
    held = {r["request_id"] for p in view["periods"] for c in p["clusters"]
            for r in c["reservations"]}
    assert held == {ids["r1"], ids["r2"]}
    assert view["scenario"] == f"tiny\n$(touch {marker})"


def test_reports_keep_hostile_ids_as_text(planned):
    root, marker, ids = planned
    scenario, plan = root / "scenario", root / "out" / "plan.json"
    book_path, html_path = root / "report.xlsx", root / "report.html"
    assert main(["report", str(scenario), "--plan", str(plan), "--out", str(book_path)]) == 0
    assert main(["report", str(scenario), "--plan", str(plan), "--out", str(html_path)]) == 0
    book = openpyxl.load_workbook(book_path)
    texts = {}
    for ws in book.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if isinstance(cell.value, str):
                    texts.setdefault(cell.value, set()).add(cell.data_type)
    # the formula-like id is a string cell, never a formula; the other ids are there as they
    # are (control characters never reach a planned scenario; tests/test_badinput.py checks
    # that the workbook escapes them in a hand-edited plan)
    assert texts[ids["p3"]] == {"s"}
    assert planable(ids["p4"]) in texts
    assert ids["p1"] in texts and planable(ids["p2"]) in texts
    assert not any(v.startswith("=HYPERLINK") and "f" in types for v, types in texts.items())
    html = html_path.read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "=HYPERLINK(&#34;http://evil.example/&#34;,&#34;click&#34;)" in html
    assert not marker.exists()


def test_dashboard_and_metrics_keep_hostile_ids_as_text(planned, tmp_path):
    # The planable hostile scenario through planner cycle, then every page of planner serve
    # for every project and team: markup stays text, ids come back exact in /metrics and
    # the API, and nothing runs.
    from urllib.parse import quote

    from prometheus_client.parser import text_string_to_metric_families

    from tests.served import get, get_json, raw, served

    root, marker, ids = planned
    scenario, state = root / "scenario", tmp_path / "state"
    assert main(["cycle", str(scenario), "--state", str(state), "--as-of", "2026-11-02",
                 "--export", "slurm,kueue,json"]) == 0
    with served(state) as url:
        org = get_json(url, "/api/org")
        nodes = {n["node"]: n["kind"] for n in org["nodes"]}
        assert {planable(ids[p]) for p in ("p1", "p2", "p3", "p4")} <= set(nodes)
        pages = ["/", "/cycles", "/cycles/2026-11-02T00-00-00Z"]
        pages += [f"/{'project' if kind == 'project' else 'node'}/{quote(node, safe='')}"
                  for node, kind in nodes.items()]
        for page in pages:
            code, html = get(url, page)
            assert code == 200, page
            assert "<script>alert(1)</script>" not in html, page
        code, html = get(url, f"/project/{quote(planable(ids['p4']), safe='')}")
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        code, text = get(url, "/metrics")
        families = {f.name: f for f in text_string_to_metric_families(text)}
        labels = {s.labels["project"] for s in families["gpu_planner_budget_ngh"].samples}
        assert labels == {planable(ids[p]) for p in ("p1", "p2", "p3", "p4")}
        body = get_json(url, f"/api/projects/{quote(ids['p1'], safe='')}")
        assert body["line"]["node"] == ids["p1"]
        # JSON carries the ids as they are, as data: served as JSON, never sniffed as HTML
        code, headers, _ = raw(url, "/api/status")
        assert headers["content-type"] == "application/json"
        assert headers["x-content-type-options"] == "nosniff"
    assert not marker.exists()


def test_queue_demand_and_tick_carry_hostile_ids_inert(planned, tmp_path):
    # planner ingest squeue: the accounts of hostile projects in the queue become their ids
    # in demand.csv (CSV-quoted data); planner tick's moves for those projects run as argv
    # and print quoted; nothing touches the marker
    import subprocess

    from planner.exporters.slurm import qos_name
    from planner.ingest.squeue import SqueueJob, squeue_text
    from planner.tick_run import run_tick
    from tests.test_tick import Fake, state_with

    root, marker, ids = planned
    scenario = tmp_path / "scenario"
    shutil.copytree(root / "scenario", scenario)
    (scenario / "demand.csv").rename(scenario / "declared_demand.csv")
    names = {p: planable(ids[p]) for p in ("p1", "p2", "p3")}
    queue = [SqueueJob(str(10 + i), None, account(name), "h100-a", qos_name(name), "PENDING",
                       "QOSGrpGRESMinutes", 8, 1, 3600, 0, None)
             for i, name in enumerate(names.values())]
    (tmp_path / "squeue.txt").write_text(squeue_text(queue))
    assert main(["ingest", "squeue", str(tmp_path / "squeue.txt"), str(scenario),
                 "--now", "2026-11-02T00:00:00", "--no-forecast"]) == 0
    rows = list(csv.DictReader(io.StringIO((scenario / "demand.csv").read_text())))
    queued = {r["project"] for r in rows if r["start"] == "2026-11-02T00:00:00Z"
              and r["end"] == "2026-11-03T00:00:00Z" and r["gpus"] == "8"}
    assert set(names.values()) <= queued
    # the tick on the hostile plan: every budget spent
    plan = json.loads((root / "hostile" / "plan.json").read_text())
    state = state_with(tmp_path, plan, ["slurm"])
    hostile_queue = [SqueueJob(str(20 + i), None, account(p), "h100-a", qos_name(p),
                               "PENDING", "QOSGrpGRESMinutes", 8, 1, 3600, 0, None)
                     for i, p in enumerate(projects(ids))]
    fake = Fake(hostile_queue, "".join(f"QOS={qos_name(p)}(9)\n    GrpTRESMins=gres/gpu=0(0)\n"
                                       for p in projects(ids)))
    done = run_tick(state, runner=fake)
    assert len(done.moves) == 4
    # (a project of no budget is overdrawn: rule 8 moves its job to gp-overdrawn)
    from planner.contract import overdrawn

    gone = {account(p) for p in overdrawn(plan)}
    for argv, job in zip(fake.ran[2:], hostile_queue, strict=True):
        assert argv[:3] == ["scontrol", "update", argv[2]] and argv[2][6:].isdigit()
        assert argv[3] == ("QOS=gp-overdrawn" if job.account in gone
                           else "QOS=gp-opportunistic")
    printed = [line.split("  #")[0].strip() for line in done.lines if "scontrol" in line]
    script = "scontrol() { printf '%s\\n' \"$@\"; }\n" + "\n".join(printed) + "\n"
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert "QOS=gp-opportunistic" in ran.stdout
    assert not marker.exists() and not Path("x").exists()
    # rule 8: the same queue when every project is overdrawn (no budget: overdrawn at
    # once) moves every job to gp-overdrawn, as argv; the accounts print quoted, inert
    for b in plan["budgets"]:
        b["budget"] = b["used"] = 0.0
    over = state_with(tmp_path / "over", plan, ["slurm"])
    fake = Fake(hostile_queue, fake.assoc)
    done = run_tick(over, runner=fake)
    assert [argv[3] for argv in fake.ran[2:]] == ["QOS=gp-overdrawn"] * 4
    (listed,) = [line for line in done.lines if line.startswith("  overdrawn (rule 8): ")]
    said = subprocess.run(["bash", "-c", "printf '%s\\n' " + listed.split(": ", 1)[1]
                           .replace(",", "")], capture_output=True, text=True, check=True)
    assert set(said.stdout.split()) == {account(p) for p in projects(ids)}
    assert not marker.exists() and not Path("x").exists()


def test_sacct_ingest_writes_hostile_ids_to_unbudgeted_csv_as_data(planned, tmp_path,
                                                                   monkeypatch, capsys):
    # planner ingest sacct: the hostile projects' jobs that ran under gp-opportunistic or
    # gp-overdrawn (their accounts as the export names them) go to unbudgeted.csv, written
    # by the CSV writer and read back to the same ids; an unknown account that is itself
    # hostile (a command, a control character, a terminal escape) is never written, and the
    # report prints it with its control characters escaped; nothing runs an id (no MARK, x)
    from planner.exporters.slurm import OPPORTUNISTIC_QOS, OVERDRAWN_QOS
    from planner.inputs.load import load_unbudgeted
    from planner.inputs.schema import UNBUDGETED_FILE

    root, marker, ids = planned
    monkeypatch.chdir(tmp_path)  # a `touch x` would land here
    scenario = tmp_path / "scenario"
    shutil.copytree(root / "scenario", scenario)
    names = {p: planable(ids[p]) for p in ("p1", "p2", "p3", "p4")}  # the scenario's ids
    lines = [f"{3000 + i}|{account(name)}|h100-a|gres/gpu=8|2026-11-01T00:00:00|"
             f"2026-11-01T02:00:00|COMPLETED|{OVERDRAWN_QOS if i % 2 else OPPORTUNISTIC_QOS}"
             for i, name in enumerate(names.values())]
    lines.append("3100|$(touch x)`touch x`\x01\x1b[31m|h100-a|gres/gpu=8|2026-11-01T00:00:00|"
                 f"2026-11-01T02:00:00|COMPLETED|{OPPORTUNISTIC_QOS}")
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("\n".join(lines) + "\n")
    assert main(["ingest", "sacct", str(sacct), str(scenario), "--now",
                 "2026-11-02T00:00:00"]) == 0
    said = capsys.readouterr()
    # the unknown account's job is not written to unbudgeted.csv: reported as unknown,
    # its account printed escaped
    assert ("skipped, unknown project (1): 3100 (row 5, account "
            "'$(touch x)`touch x`\\x01\\x1b[31m')") in said.out, said.out
    assert "\x01" not in said.out + said.err and "\x1b" not in said.out + said.err
    text = (scenario / UNBUDGETED_FILE).read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["job_id"], r["project"]) for r in rows] == [
        (f"slurm:h100-a:{3000 + i}", name) for i, name in enumerate(names.values())]
    assert set(load_unbudgeted(scenario)["project"]) == set(names.values())
    assert not marker.exists() and not Path("x").exists()

    # bad input writes nothing and exits 2 naming the file, the line and the field: a job
    # id with a control character; a newline inside a field splits its line in two, each
    # with the wrong number of fields (named by line: the line as a whole is wrong)
    before = {p.name: p.read_bytes() for p in scenario.iterdir()}
    good = lines[0].replace("3000|", "3200|", 1)
    for bad, row, field in ((good.replace("3200|", "32\x0100|", 1), 2, "JobIDRaw"),
                            (good.replace("|h100-a|", "|h100\n-a|", 1), 2, None)):
        sacct.write_text(lines[1] + "\n" + bad + "\n")
        assert main(["ingest", "sacct", str(sacct), str(scenario), "--now",
                     "2026-11-02T00:00:00"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "sacct.txt" in err, err
        assert f"row {row}" in err and (field is None or field in err), err
        assert {p.name: p.read_bytes() for p in scenario.iterdir()} == before
    assert not marker.exists() and not Path("x").exists()


#: markup a user may write in a name, an id or a path: rich's closing tag that closes
#: nothing (rich refuses it with a traceback) and its hyperlink (hidden in an escape), and
#: matplotlib's mathtext that does not parse (a chart's labels stop with a traceback)
MARKUP = "[/x][link=https://evil.example/]$^$"


def test_terminal_output_keeps_markup_in_names_ids_and_paths_as_text(planned, tmp_path,
                                                                     monkeypatch, capsys):
    # every id and the scenario's name start with MARKUP (besides their hostile
    # characters), and the cycle's accounting file sits in a folder named MARKUP: planner
    # run, explain, status, check, cycle, trace and simulate print them as they are
    # (the simulate table's title, the cycle's progress were read as markup: a traceback),
    # the JSON carries them exact, the replay's files keep them as data; nothing runs
    import re

    from planner.exporters.common import spreadsheet_text

    root, marker, _ = planned
    monkeypatch.chdir(tmp_path)  # a `touch x` would land here
    ids = {k: MARKUP + planable(v) for k, v in hostile_ids(marker).items()}
    folder = hostile_scenario(tmp_path / "scenario", marker, lambda text: MARKUP + planable(text))
    out = tmp_path / "out"

    def said(*argv: str) -> str:
        assert main(list(argv)) == 0, argv
        got = capsys.readouterr()
        assert "Traceback" not in got.err and "\x1b" not in got.out + got.err
        return got.out

    def joined(text: str) -> str:  # rich wraps long lines: the words, without the wrapping
        return "".join(text.split())

    name = f"{MARKUP}tiny@NL@$(touch {marker})"
    text = said("run", str(folder), "--out", str(out))
    assert joined(name) in joined(text)
    plan = str(out / "plan.json")
    for p in ("p1", "p2", "p3", "p4"):
        assert ids[p] in said("explain", ids[p], "--scenario", str(folder), "--plan", plan)
        body = json.loads(said("explain", ids[p], "--scenario", str(folder), "--plan", plan,
                               "--json"))
        assert body["subject"]["project"] == ids[p] and body["scenario"] == name
    table = said("status", str(folder), "--plan", plan)
    assert all(ids[p] in table for p in ("p1", "p2", "p3", "p4"))
    status = json.loads(said("status", str(folder), "--plan", plan, "--json"))
    assert {r["project"] for r in status["rows"]} == {ids[p] for p in ("p1", "p2", "p3", "p4")}
    said("check", plan, str(folder))
    where = tmp_path / "[b]" / "[/x]"  # (folders "[b]", "[", "x]": the path reads [b]/[/x])
    sacct = where / "sacct.txt"
    sacct.parent.mkdir(parents=True)
    sacct.write_text("")
    text = said("cycle", str(folder), "--state", str(where / "state"), "--sacct",
                str(sacct), "--as-of", "2026-11-02", "--export", "slurm,kueue,json")
    assert joined(str(where / "state")) in joined(text)
    trace = tmp_path / "trace.csv"
    assert joined(name) in joined(said("trace", "synthetic", str(folder), "--out", str(trace),
                                       "--jobs", "200"))
    table = said("simulate", str(folder), "--trace", str(trace), "--policy", "priority",
                 "--out", str(tmp_path / "sim"))
    assert joined(f"200 jobs replayed on {name}") in joined(table)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "sim" / "priority-jobs.csv")
                                           .read_text())))
    wanted = {spreadsheet_text(ids[p]) for p in ("p1", "p2", "p3", "p4")}
    assert {r["project"] for r in rows} <= wanted and len({r["project"] for r in rows}) > 1
    page = (tmp_path / "sim" / "report.html").read_text()
    assert "<script>" not in page and not re.search(r"<a [^>]*evil", page)
    assert "vision team; touch" in page  # a team's name, as text
    assert not marker.exists() and not Path("x").exists()


def test_kueue_ingest_reports_hostile_workload_names_as_text(tmp_path, monkeypatch, capsys):
    # planner ingest kueue: a Workload the scenario does not know, whose namespace, name and
    # ClusterQueue are commands and markup, is reported skipped with them as written (the
    # ClusterQueue quoted), nothing runs; with a terminal escape in a name the file is
    # refused, exit 2, the character escaped in the message, nothing written
    from tests.test_ingest import ORG_CSV, WORKLOADS

    monkeypatch.chdir(tmp_path)  # a `touch x` would land here
    folder = write_scenario(tmp_path / "scenario", org=ORG_CSV + "P_5,language,1\n", usage=None)
    listed = json.loads(WORKLOADS.read_text())
    unknown = listed["items"][4]  # team-shared's notebook: no project of the scenario
    unknown["metadata"].update(namespace="$(touch x)[/x]", name="n m[link=https://e.example/]")
    unknown["status"]["admission"]["clusterQueue"] = "`touch x`; touch x [/y]"
    source = tmp_path / "wl.json"
    source.write_text(json.dumps(listed))
    assert main(["ingest", "kueue", str(source), str(folder), "--now",
                 "2026-11-02T06:00:00"]) == 0
    out = capsys.readouterr().out
    assert ("skipped, unknown project (1): $(touch x)[/x]/n m[link=https://e.example/] "
            "(row 5, ClusterQueue '`touch x`; touch x [/y]')") in out, out
    before = (folder / "usage.csv").read_bytes()
    unknown["metadata"]["name"] = "n\x1b]8;;https://e.example/\x07m"
    source.write_text(json.dumps(listed))
    assert main(["ingest", "kueue", str(source), str(folder), "--now",
                 "2026-11-02T07:00:00"]) == 2
    said = capsys.readouterr()
    assert "wl.json, row 5, column items[4].metadata.name" in said.err, said.err
    assert "\\x1b" in said.err and "\x1b" not in said.out + said.err
    assert (folder / "usage.csv").read_bytes() == before
    assert not Path("x").exists()


def test_kueue_tick_serves_hostile_projects_late_and_prints_them_inert(planned, tmp_path,
                                                                        monkeypatch):
    # planner cycle --export kueue on the planable hostile scenario, then planner tick with
    # 8-GPU gangs pending on a100-b, where nobody holds quota (its 16 GPUs in the pool):
    # p1 ($(touch MARK)) and p3 (the formula) are served (rule 7), each line quoting its
    # project as Python reads it back; the widened set goes to kubectl as argv, printed as
    # bash reads it back; the set keeps the ids as annotations; nothing runs an id
    import ast
    import shlex

    from planner.tick_run import run_tick
    from tests.test_pending import workload
    from tests.test_tick import Fake, workloads_file

    root, marker, ids = planned
    monkeypatch.chdir(tmp_path)  # a `touch x` would land here
    state = tmp_path / "state"
    assert main(["cycle", str(root / "scenario"), "--state", str(state), "--as-of",
                 "2026-11-02", "--export", "kueue"]) == 0
    served = {p: planable(ids[p]) for p in ("p1", "p3")}
    wl = workloads_file(tmp_path / "wl.json", [workload(safe_name(name), 1, 8, name=f"g{i}")
                                               for i, name in enumerate(served.values())],
                        {"cluster": "a100-b", "gpu_type": "A100"})
    fake = Fake([])
    done = run_tick(state, workloads=wl, runner=fake)
    assert sorted(done.late) == sorted((name, "a100-b", 8) for name in served.values())
    late = [line for line in done.lines if line.startswith("  late: ")]
    said = {ast.literal_eval(line[len("  late: "):line.index(" on '")]) for line in late}
    assert said == set(served.values())
    (argv,) = fake.ran
    (printed,) = [line.strip() for line in done.lines if line.strip().startswith("kubectl")]
    assert argv[:2] == ["kubectl", "apply"] and shlex.split(printed) == argv
    docs = [d for d in yaml.safe_load_all(Path(argv[-1]).read_text()) if d]
    quoted = {d["metadata"]["annotations"]["gpu-planner.io/id"] for d in docs
              if d["kind"] == "ClusterQueue"}
    assert set(served.values()) <= quoted
    assert not marker.exists() and not Path("x").exists()


def test_export_workloads_and_late_print_and_write_hostile_projects_inert(planned, tmp_path,
                                                                          monkeypatch, capsys):
    # planner export --to kueue on the planable hostile plan, then the hourly
    # planner export --late with 8-GPU gangs of p1 ($(touch MARK)) and p3 (the formula)
    # pending on a100-b, where the plan gives nobody quota: each late line quotes its
    # project as Python reads it back, the widened set keeps the ids as annotations, and
    # planner export --workloads (rule 6) writes them as data too; nothing runs an id
    import ast

    from tests.test_pending import workload
    from tests.test_tick import workloads_file

    root, marker, ids = planned
    monkeypatch.chdir(tmp_path)  # a `touch x` would land here
    plan, scenario = str(root / "out" / "plan.json"), str(root / "scenario")
    served = {planable(ids[p]) for p in ("p1", "p3")}
    wl = workloads_file(tmp_path / "wl.json", [workload(safe_name(name), 1, 8, name=f"g{i}")
                                               for i, name in enumerate(sorted(served))],
                        {"cluster": "a100-b", "gpu_type": "A100"})
    applied = tmp_path / "applied"
    assert main(["export", plan, "--to", "kueue", "--scenario", scenario,
                 "--out", str(applied)]) == 0
    (set_path,) = sorted(applied.glob("kueue-*.yaml"))
    capsys.readouterr()
    late = tmp_path / "late"
    assert main(["export", plan, "--to", "kueue", "--scenario", scenario, "--out", str(late),
                 "--workloads", str(wl), "--late", str(set_path)]) == 0
    got = capsys.readouterr()
    assert "Traceback" not in got.err
    lines = [line for line in got.out.splitlines() if line.startswith("  late: ")]
    said = {ast.literal_eval(line[len("  late: "):line.index(" on '")]) for line in lines}
    assert said == served
    docs = [d for d in yaml.safe_load_all((late / set_path.name).read_text()) if d]
    quoted = {d["metadata"]["annotations"]["gpu-planner.io/id"] for d in docs
              if d["kind"] == "ClusterQueue"}
    assert served <= quoted
    widened = tmp_path / "widened"
    assert main(["export", plan, "--to", "kueue", "--scenario", scenario,
                 "--out", str(widened), "--workloads", str(wl)]) == 0
    docs = [d for path in sorted(widened.glob("kueue-*.yaml"))
            for d in yaml.safe_load_all(path.read_text()) if d]
    assert served <= {d["metadata"]["annotations"]["gpu-planner.io/id"] for d in docs
                      if d["kind"] == "ClusterQueue"}
    assert not marker.exists() and not Path("x").exists()
