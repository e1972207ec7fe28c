"""planner ingest: sacct and Kueue Workloads into usage.csv, worked out by hand."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cli import main
from planner.config import load_model
from planner.errors import InputError
from planner.exporters.kueue import export_kueue
from planner.exporters.slurm import export_slurm
from planner.ingest import ingest_usage
from planner.ingest.ledger import COLUMNS, UsageRow, merge, render
from planner.ingest.names import names_for
from planner.ingest.records import (
    NO_GPU,
    NO_TIME,
    NOT_ADMITTED,
    OPPORTUNISTIC,
    OUTSIDE,
    PENDING,
    STALE,
    UNKNOWN_CLUSTER,
    UNKNOWN_PROJECT,
)
from planner.ingest.sacct import FIELDS, parse_tres
from planner.inputs.load import load_scenario
from planner.run import plan_scenario
from tests.export_fixtures import ORG, PLAN
from tests.scenario_factory import ORG_CSV, USAGE_CSV, write_scenario, write_workbook

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SACCT = FIXTURES / "sacct-allocations.txt"
WORKLOADS = FIXTURES / "kueue-workloads.json"
WORKLOAD_CRD = FIXTURES / "kueue.x-k8s.io_workloads.excerpt.yaml"
NOW = pd.Timestamp("2026-11-02T10:00:00Z")
# the tiny scenario (quarter 2026-10-01 to 2027-01-01, as_of 2026-11-02; clusters h100-a
# H100 and a100-b A100 at 0.55) plus a project whose id is no DNS label: its Slurm account,
# ClusterQueue and namespace are safe_name("P_5") = "p-5-116310a4"
P5 = "p-5-116310a4"


def scenario(tmp_path: Path, **overrides) -> Path:
    return write_scenario(tmp_path / "scenario", org=ORG_CSV + "P_5,language,1\n", **overrides)


def usage_text(folder: Path) -> str:
    return (folder / "usage.csv").read_text(encoding="utf-8")


# --- sacct --------------------------------------------------------------------------------


def test_parse_tres_counts_typed_and_untyped_gpus_once():
    assert parse_tres("billing=8,cpu=8,gres/gpu=8,mem=64G,node=1") == (8, None)
    # Slurm prints the total and the typed count together: the total, not twice
    assert parse_tres("cpu=4,gres/gpu=4,gres/gpu:h100=4,node=1") == (4, None)
    # only typed counts (two types): their sum
    assert parse_tres("gres/gpu:h100=2,gres/gpu:a100=1") == (3, None)
    assert parse_tres("cpu=1,mem=4G,node=1") == (0, None)
    assert parse_tres("") == (0, None)
    assert parse_tres("cpu=1,gres/gpu=two")[0] is None
    assert parse_tres("cpu")[0] is None


# the recorded sacct output (tests/fixtures/sacct-allocations.txt), ingested at NOW
# = 2026-11-02T10:00Z, row by row:
#  1 1001 p1 h100-a 8 GPUs 08:00-20:00 Nov 1               -> written, 12 h
#  2 1002 p2 h100-a gres/gpu=4 + gres/gpu:h100=4, End Unknown -> 4 GPUs (not 8), running,
#         end = now (24 h)
#  3 1003 p3 a100-b typed only gres/gpu:a100=2, cancelled after 6.5 h -> written, 2 GPUs
#  4 1004 pending (Start Unknown)                            -> skipped, never started
#  5 1005 no gres/gpu                                        -> skipped, no GPU
#  6 1006 account physics (no project)                       -> skipped, unknown project
#  7 1007 partition gpu-debug (no cluster)                   -> skipped, unknown cluster
#  8 1008 P_5 16 GPUs Sep 30 18:00 - Oct 1 06:00             -> clipped to Oct 1 00:00-06:00
#  9 1009 Sep 1-2                                            -> skipped, outside the quarter
# 10 1010 Start = End (cancelled as it started)              -> skipped, ran no time
# 11 1011 account vision: a team, not a project              -> skipped, unknown project
# 12 1012 p1 preempted after 2 h across midnight             -> written, 1 GPU
# 13 1013 Start None, cancelled while pending                -> skipped, never started
SACCT_ROWS = [
    "slurm:a100-b:1008,P_5,a100-b,16,2026-10-01T00:00:00Z,2026-10-01T06:00:00Z,",
    "slurm:h100-a:1012,p1,h100-a,1,2026-10-31T23:00:00Z,2026-11-01T01:00:00Z,",
    "slurm:a100-b:1003,p3,a100-b,2,2026-11-01T00:00:00Z,2026-11-01T06:30:00Z,",
    "slurm:h100-a:1001,p1,h100-a,8,2026-11-01T08:00:00Z,2026-11-01T20:00:00Z,",
    "slurm:h100-a:1002,p2,h100-a,4,2026-11-01T10:00:00Z,2026-11-02T10:00:00Z,running",
]
# the tiny scenario's own rows, kept as they were (the new state column empty)
OLD_ROWS = [line + "," for line in USAGE_CSV.splitlines()[1:]]


def test_recorded_sacct_output_is_ingested_row_by_row(tmp_path: Path):
    folder = scenario(tmp_path)
    report = ingest_usage(folder, "sacct", SACCT, now=NOW)
    assert usage_text(folder).splitlines() == [",".join(COLUMNS), *OLD_ROWS, *SACCT_ROWS]
    assert report.counts == {"added": 5, "updated": 0, "unchanged": 0, "skipped": 8}
    assert report.written and not report.dry_run
    assert dict(report.skipped) == {
        PENDING: ("1004 (row 4, PENDING)", "1013 (row 13, CANCELLED by 0)"),
        NO_GPU: ("1005 (row 5, billing=1,cpu=1,mem=4G,node=1)",),
        UNKNOWN_PROJECT: ("1006 (row 6, account 'physics')", "1011 (row 11, account 'vision')"),
        UNKNOWN_CLUSTER: ("1007 (row 7, partition 'gpu-debug')",),
        NO_TIME: ("slurm:h100-a:1010 (row 10, start 2026-11-01T12:00:00Z, "
                  "end 2026-11-01T12:00:00Z)",),
        OUTSIDE: ("slurm:h100-a:1009 (row 9, 2026-09-01T00:00:00Z to 2026-09-02T00:00:00Z)",),
    }
    assert report.clipped == ("slurm:a100-b:1008 (2026-09-30T18:00:00Z to "
                              "2026-10-01T06:00:00Z)",)
    # the ledger is a valid scenario, and the plan charges what ran before as_of (Nov 2):
    # p1: j1 8 x 48 h + 1012 1 x 2 h + 1001 8 x 12 h = 482 NGH (H100, rate 1);
    # p2: j2 4 x 12 h + 1002 4 x 14 h (Nov 1 10:00 to as_of) = 104;
    # P_5: 16 x 6 h x 0.55 = 52.8; p3: j3 8 x 48 x 0.55 + 1003 2 x 6.5 x 0.55 = 218.35
    loaded = load_scenario(folder)
    state = dict(zip(loaded.usage["job_id"], loaded.usage["state"], strict=True))
    assert len(state) == 8 and {j for j, s in state.items() if s} == {"slurm:h100-a:1002"}
    assert state["slurm:h100-a:1002"] == "running"
    used = {b["project"]: b["used"] for b in
            plan_scenario(loaded, load_model("default")).plan.body["budgets"]}
    assert used["p1"] == pytest.approx(482.0)
    assert used["p2"] == pytest.approx(104.0)
    assert used["P_5"] == pytest.approx(52.8)
    assert used["p3"] == pytest.approx(218.35)


def test_same_file_twice_gives_the_same_bytes_and_running_jobs_are_updated(tmp_path: Path):
    folder = scenario(tmp_path)
    ingest_usage(folder, "sacct", SACCT, now=NOW)
    once = (folder / "usage.csv").read_bytes()
    again = ingest_usage(folder, "sacct", SACCT, now=NOW)
    assert (folder / "usage.csv").read_bytes() == once
    assert again.counts == {"added": 0, "updated": 0, "unchanged": 5, "skipped": 8}
    assert not again.written
    # later, 1002 has finished: its row is updated in place, not doubled
    finished = SACCT.read_text().replace(
        "2026-11-01T10:00:00|Unknown|RUNNING", "2026-11-01T10:00:00|2026-11-02T16:00:00|COMPLETED")
    later = tmp_path / "later.txt"
    later.write_text(finished)
    report = ingest_usage(folder, "sacct", later, now=NOW + pd.Timedelta(hours=12))
    assert (report.added, report.updated) == ((), ("slurm:h100-a:1002",))
    rows = usage_text(folder).splitlines()
    assert rows[-1] == ("slurm:h100-a:1002,p2,h100-a,4,2026-11-01T10:00:00Z,"
                        "2026-11-02T16:00:00Z,")
    assert len(rows) == 1 + len(OLD_ROWS) + len(SACCT_ROWS)
    # the older dump (1002 still running) read again changes nothing: finished is final
    stale = ingest_usage(folder, "sacct", SACCT, now=NOW + pd.Timedelta(hours=20))
    assert stale.skipped[STALE] == ("slurm:h100-a:1002 (usage.csv has end 2026-11-02T16:00:00Z)",)
    assert usage_text(folder).splitlines() == rows


def test_a_running_job_is_extended_by_a_later_now_and_not_shortened_by_an_earlier(
        tmp_path: Path):
    folder = scenario(tmp_path)
    ingest_usage(folder, "sacct", SACCT, now=NOW)
    ingest_usage(folder, "sacct", SACCT, now=NOW + pd.Timedelta(hours=2))
    assert usage_text(folder).splitlines()[-1].endswith("2026-11-02T12:00:00Z,running")
    report = ingest_usage(folder, "sacct", SACCT, now=NOW)  # an older snapshot
    assert STALE in report.skipped
    assert usage_text(folder).splitlines()[-1].endswith("2026-11-02T12:00:00Z,running")


def test_dry_run_reports_and_writes_nothing(tmp_path: Path, capsys):
    folder = scenario(tmp_path)
    before = (folder / "usage.csv").read_bytes()
    assert main(["ingest", "sacct", str(SACCT), str(folder), "--now", "2026-11-02T10:00:00Z",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "5 added, 0 updated, 0 unchanged, 8 skipped (dry run: nothing written)" in out
    assert "skipped, unknown project (2): 1006 (row 6, account 'physics')" in out
    assert (folder / "usage.csv").read_bytes() == before


def test_cli_ingests_into_a_folder_without_usage_csv(tmp_path: Path, capsys):
    folder = scenario(tmp_path, usage=None)
    assert main(["ingest", "sacct", str(SACCT), str(folder), "--now",
                 "2026-11-02T10:00:00"]) == 0
    assert usage_text(folder).splitlines() == [",".join(COLUMNS), *SACCT_ROWS]
    assert "5 added" in capsys.readouterr().out


BAD_LINES = [  # (line, column named); each goes in as row 3 after two good lines
    ("1|p1|h100-a|gres/gpu=1|2026-11-01T00:00:00|2026-11-01T01:00:00", None),
    ("x7|p1|h100-a|gres/gpu=1|2026-11-01T00:00:00|2026-11-01T01:00:00|COMPLETED", "JobIDRaw"),
    ("7|p1|h100-a|gres/gpu=two|2026-11-01T00:00:00|2026-11-01T01:00:00|COMPLETED", "AllocTRES"),
    ("7|p1|h100-a|cpu,gres/gpu=1|2026-11-01T00:00:00|2026-11-01T01:00:00|COMPLETED",
     "AllocTRES"),
    ("7|p1|h100-a|gres/gpu=1|yesterday|2026-11-01T01:00:00|COMPLETED", "Start"),
    ("7|p1|h100-a|gres/gpu=1|2026-11-01T00:00:00|2026-13-01T01:00:00|COMPLETED", "End"),
    ("7|p1|h100-a|gres/gpu=1|2026-11-01T02:00:00|2026-11-01T01:00:00|COMPLETED", "End"),
]


@pytest.mark.parametrize(("line", "column"), BAD_LINES)
def test_a_malformed_sacct_line_exits_2_naming_file_row_column_and_writes_nothing(
        tmp_path: Path, capsys, line: str, column: str | None):
    folder = scenario(tmp_path)
    before = (folder / "usage.csv").read_bytes()
    good = SACCT.read_text().splitlines()[:2]
    bad = tmp_path / "sacct.txt"
    bad.write_text("\n".join([*good, line]) + "\n")
    assert main(["ingest", "sacct", str(bad), str(folder), "--now", "2026-11-02"]) == 2
    err = capsys.readouterr().err
    where = "sacct.txt, row 3" + (f", column {column}" if column else "")
    assert f"error: {where}: " in err and "nothing written" in err
    assert (folder / "usage.csv").read_bytes() == before
    with pytest.raises(InputError):
        ingest_usage(folder, "sacct", bad, now=NOW)


def test_the_sacct_header_and_job_steps_are_recognised(tmp_path: Path):
    folder = scenario(tmp_path, usage=None)
    text = ("JobIDRaw|Account|Partition|AllocTRES|Start|End|State\n"
            "7|p1|h100-a|gres/gpu=2|2026-11-01T00:00:00|2026-11-01T01:00:00|COMPLETED\n"
            "7.batch|p1|h100-a|gres/gpu=2|2026-11-01T00:00:00|2026-11-01T01:00:00|COMPLETED\n")
    path = tmp_path / "steps.txt"
    path.write_text(text)
    report = ingest_usage(folder, "sacct", path, now=NOW)
    assert report.added == ("slurm:h100-a:7",)
    assert [k for k in report.skipped] == [
        "a job step, not an allocation (run sacct with --allocations)"]


def test_the_docs_show_the_command_and_the_sacct_format():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "how-to" / "ingest-usage.md"
              ).read_text(encoding="utf-8")
    assert "planner ingest sacct|kueue FILE [SCENARIO] [--now TIME] [--dry-run]" in readme
    assert f"--format={','.join(FIELDS)}" in readme and "kubectl get workloads -A -o json" \
        in readme


def test_other_bad_input_exits_2(tmp_path: Path, capsys):
    folder = scenario(tmp_path)
    book = write_workbook(tmp_path / "book.xlsx", folder)
    assert main(["ingest", "sacct", str(SACCT), str(book)]) == 2
    assert "workbook scenario has no usage ledger" in capsys.readouterr().err
    assert main(["ingest", "sacct", str(SACCT), str(folder), "--now", "soon"]) == 2
    assert "--now: 'soon' is not a time" in capsys.readouterr().err
    assert main(["ingest", "sacct", str(tmp_path / "missing.txt"), str(folder)]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "latin1.txt").write_bytes("7|p\xe9|h100-a|||\n".encode("latin-1"))
    assert main(["ingest", "sacct", str(tmp_path / "latin1.txt"), str(folder)]) == 2
    assert "latin1.txt, row 1: not UTF-8" in capsys.readouterr().err


# --- names: the exporters' own naming, inverted -------------------------------------------


def test_names_invert_what_the_exporters_write():
    # the hand plan's org and clusters (tests/export_fixtures.py), exported, map back
    from planner.inputs import Scenario, ScenarioConfig

    clusters = pd.DataFrame({"cluster": ["c1", "c2"], "gpu_type": ["H100", "A100"],
                             "nodes": [4, 2], "gpus_per_node": [8, 8]})
    cfg = ScenarioConfig("hand", pd.Timestamp("2026-10-01", tz="UTC"),
                         pd.Timestamp("2027-01-01", tz="UTC"),
                         pd.Timestamp("2026-11-16", tz="UTC"))
    empty = pd.DataFrame()
    hand = Scenario(cfg, clusters, ORG, empty, empty, empty, empty)
    slurm, kueue = names_for(hand, "sacct"), names_for(hand, "kueue")
    projects = {"p1", "p2", "=P 3"}
    script = export_slurm(PLAN, ORG)
    accounts = {line.split("add account ")[1].split()[0] for line in script.splitlines()
                if "add account " in line}
    assert {slurm.owners[a] for a in accounts if a in slurm.owners} == projects
    assert set(slurm.owners) <= accounts  # teams and areas are accounts of no project
    partitions = {w.split("=", 1)[1].strip("'\"") for w in script.split()
                  if w.startswith("PartitionName=")}
    assert {slurm.places[p] for p in partitions} == {r["cluster"] for r in PLAN["reservations"]}
    docs = [d for text in export_kueue(PLAN, ORG).values() for d in yaml.safe_load_all(text)
            if isinstance(d, dict) and "kind" in d]
    queues = {d["metadata"]["name"]: d["metadata"]["annotations"]["gpu-planner.io/id"]
              for d in docs if d["kind"] == "ClusterQueue"}
    flavors = {d["metadata"]["name"]: d["metadata"]["annotations"]["gpu-planner.io/id"]
               for d in docs if d["kind"] == "ResourceFlavor"}
    assert dict(kueue.owners) == queues and set(queues.values()) == projects
    assert dict(kueue.places) == flavors == {"c1": "c1", "c2": "c2"}


# --- Kueue ----------------------------------------------------------------------------------


def workload_schema() -> dict:
    crd = yaml.safe_load(WORKLOAD_CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return version["schema"]["openAPIV3Schema"]


def test_the_recorded_workloads_validate_against_the_workload_crd():
    schema = workload_schema()
    listed = json.loads(WORKLOADS.read_text())
    assert (listed["kind"], listed["apiVersion"]) == ("List", "v1")
    for item in listed["items"]:
        jsonschema.Draft7Validator(schema).validate(item)
        # the CRD's CEL rule, by hand: an admission assigns every pod set
        admission = item["status"].get("admission")
        if admission:
            assert len(admission["podSetAssignments"]) == len(item["spec"]["podSets"])
    broken = json.loads(json.dumps(listed["items"][0]))
    broken["status"]["conditions"][0]["status"] = "yes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(broken)


# the recorded Workloads (tests/fixtures/kueue-workloads.json) at now = Nov 2 06:00:
#  1 p1/job-train: ClusterQueue p1, flavor h100-a, 2 pods x 4 GPUs, admitted 08:00,
#    finished 14:00 Nov 1                                          -> 8 GPUs, 6 h
#  2 P_5's sweep: launcher (no GPU) + 4 workers x 2 GPUs (limits only) on a100-b,
#    admitted Nov 2 00:00, running                                 -> 8 GPUs to now, running
#  3 p2/job-eval: QuotaReserved False, no admission                -> not admitted
#  4 p3/job-pretrain: preempted after 7200 s admitted, re-admitted 12:00, finished 16:00;
#    init container 1 GPU, containers 2 + 2                        -> 4 GPUs, 10:00-16:00
#  5 shared/job-notebook in ClusterQueue team-shared               -> unknown project
#  6 p4/job-partial: 4 pods wanted, 2 admitted x 1 GPU, Oct 31 22:00 - Nov 1 02:00 -> 2 GPUs
#  7 p1/job-prep: CPU only                                         -> no GPU
KUEUE_ROWS = [
    "kueue:p4/job-partial-5e6f7-8a9b0,p4,h100-a,2,2026-10-31T22:00:00Z,2026-11-01T02:00:00Z,",
    "kueue:p1/job-train-7f3c1-5a1e2,p1,h100-a,8,2026-11-01T08:00:00Z,2026-11-01T14:00:00Z,",
    "kueue:p3/job-pretrain-4d5e6-7f8a9,p3,a100-b,4,2026-11-01T10:00:00Z,"
    "2026-11-01T16:00:00Z,",
    f"kueue:{P5}/job-sweep-2b9d4-0c7d1,P_5,a100-b,8,2026-11-02T00:00:00Z,"
    "2026-11-02T06:00:00Z,running",
]


def test_recorded_workloads_are_ingested_workload_by_workload(tmp_path: Path):
    folder = scenario(tmp_path, usage=None)
    now = pd.Timestamp("2026-11-02T06:00:00Z")
    report = ingest_usage(folder, "kueue", WORKLOADS, now=now)
    assert usage_text(folder).splitlines() == [",".join(COLUMNS), *KUEUE_ROWS]
    assert dict(report.skipped) == {
        NOT_ADMITTED: ("p2/job-eval-9e8d7-3b2a1 (row 3)",),
        NO_GPU: ("p1/job-prep-6f7a8-9b0c1 (row 7, ClusterQueue p1)",),
        UNKNOWN_PROJECT: ("shared/job-notebook-1a2b3-4c5d6 (row 5, ClusterQueue 'team-shared')",),
    }
    once = (folder / "usage.csv").read_bytes()
    assert ingest_usage(folder, "kueue", WORKLOADS, now=now).counts["unchanged"] == 4
    assert (folder / "usage.csv").read_bytes() == once
    # the sweep finishes at 09:00: updated, not doubled
    listed = json.loads(WORKLOADS.read_text())
    listed["items"][1]["status"]["conditions"].append({
        "type": "Finished", "status": "True", "lastTransitionTime": "2026-11-02T09:00:00Z",
        "reason": "Succeeded", "message": "Job finished successfully"})
    later = tmp_path / "later.json"
    later.write_text(json.dumps(listed))
    report = ingest_usage(folder, "kueue", later, now=now + pd.Timedelta(hours=5))
    assert report.updated == (f"kueue:{P5}/job-sweep-2b9d4-0c7d1",)
    assert usage_text(folder).splitlines()[-1] == (
        f"kueue:{P5}/job-sweep-2b9d4-0c7d1,P_5,a100-b,8,2026-11-02T00:00:00Z,"
        "2026-11-02T09:00:00Z,")


@pytest.mark.parametrize(("edit", "where"), [
    (lambda w: w["spec"]["podSets"][0].update(count="two"), "items[0].spec.podSets[0].count"),
    (lambda w: w["status"]["admission"].pop("clusterQueue"),
     "items[0].status.admission.clusterQueue"),
    (lambda w: w["status"]["conditions"][1].update(lastTransitionTime="noon"),
     "items[0].status.conditions[1].lastTransitionTime"),
    (lambda w: w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"][
        "requests"].update({"nvidia.com/gpu": "lots"}),
     "items[0].spec.podSets[0].template.spec.containers[0].resources.requests[nvidia.com/gpu]"),
    (lambda w: w["status"]["admission"]["podSetAssignments"][0].update(name="other"),
     "items[0].status.admission.podSetAssignments[0].name"),
    (lambda w: w["status"]["admission"]["podSetAssignments"][0].update(flavors={}),
     "items[0].status.admission.podSetAssignments[0].flavors"),
])
def test_a_malformed_workload_exits_2_naming_file_item_and_field(tmp_path: Path, capsys,
                                                                 edit, where):
    folder = scenario(tmp_path)
    before = (folder / "usage.csv").read_bytes()
    listed = json.loads(WORKLOADS.read_text())
    edit(listed["items"][0])
    bad = tmp_path / "wl.json"
    bad.write_text(json.dumps(listed))
    assert main(["ingest", "kueue", str(bad), str(folder), "--now", "2026-11-02"]) == 2
    err = capsys.readouterr().err.replace("\n", "")  # rich wraps long lines at 80 columns
    assert f"error: wl.json, row 1, column {where}: " in err
    assert (folder / "usage.csv").read_bytes() == before


def test_not_json_or_not_a_list_exits_2(tmp_path: Path, capsys):
    folder = scenario(tmp_path)
    bad = tmp_path / "wl.json"
    bad.write_text('{"items": [\n  {"kind": "Workload",}\n]}')
    assert main(["ingest", "kueue", str(bad), str(folder)]) == 2
    assert "error: wl.json, row 2: not JSON" in capsys.readouterr().err
    bad.write_text('{"kind": "List"}')
    assert main(["ingest", "kueue", str(bad), str(folder)]) == 2
    assert "error: wl.json, column items: not a list of Workloads" in capsys.readouterr().err


# --- the merge: order and repetition do not matter -----------------------------------------

T0 = pd.Timestamp("2026-11-01T00:00:00Z")


@st.composite
def batches(draw) -> list[UsageRow]:
    """Records of a few jobs: each finished once, and maybe seen running before."""
    rows = []
    for j in range(draw(st.integers(1, 6))):
        start = T0 + pd.Timedelta(hours=draw(st.integers(0, 48)))
        hours = draw(st.integers(1, 30))
        gpus = float(draw(st.sampled_from([1, 2, 8, 0.5])))
        job = f"slurm:h100-a:{j}"
        finished = draw(st.booleans())
        end = start + pd.Timedelta(hours=hours)
        if finished:
            rows.append(UsageRow(job, "p1", "h100-a", gpus, start, end, False))
        for seen in draw(st.lists(st.integers(1, hours), max_size=3)):  # running snapshots
            rows.append(UsageRow(job, "p1", "h100-a", gpus, start,
                                 start + pd.Timedelta(hours=seen), True))
    return rows


OTHERS = [tuple(line.split(",")) for line in OLD_ROWS]


@settings(max_examples=60, deadline=None)
@given(batches(), st.randoms(use_true_random=False))
def test_any_permutation_or_repetition_of_a_batch_gives_the_same_ledger(rows, rnd: random.Random):
    reference = render(merge(OTHERS, rows).rows)
    shuffled = rows + rnd.sample(rows, k=len(rows) // 2)  # repeated records too
    rnd.shuffle(shuffled)
    assert render(merge(OTHERS, shuffled).rows) == reference
    # the same records ingested one file at a time, in any order, end the same way
    ledger = list(OTHERS)
    for chunk in (shuffled[i::3] for i in range(3)):
        ledger = list(merge(ledger, chunk).rows)
    assert render(ledger) == reference
    # every job once; rows from elsewhere first, unchanged
    ids = [r[0] for r in merge(OTHERS, shuffled).rows]
    assert len(ids) == len(set(ids)) and ids[:len(OTHERS)] == [r[0] for r in OTHERS]


def test_rows_from_elsewhere_are_kept_and_a_finished_row_is_final():
    others = [("j1", "p1", "h100-a", "8", "2026-10-20", "2026-10-22", "")]
    done = UsageRow("slurm:h100-a:1", "p1", "h100-a", 2.0, T0, T0 + pd.Timedelta(hours=3),
                    False)
    merged = merge(others, [done])
    assert merged.rows[0] == others[0] and merged.added == ("slurm:h100-a:1",)
    other_end = UsageRow("slurm:h100-a:1", "p1", "h100-a", 2.0, T0, T0 + pd.Timedelta(hours=4),
                         False)
    again = merge(merged.rows, [other_end])
    assert again.rows == merged.rows
    assert [s.reason for s in again.skipped] == ["differs from its finished row in usage.csv"]


def test_an_evicted_workload_waiting_again_is_reported_with_the_time_it_ran(tmp_path: Path):
    folder = scenario(tmp_path, usage=None)
    listed = json.loads(WORKLOADS.read_text())
    item = listed["items"][3]  # p3's pretraining, preempted once
    del item["status"]["admission"]
    item["status"]["conditions"] = [c for c in item["status"]["conditions"]
                                    if c["type"] not in ("Admitted", "Finished")]
    jsonschema.Draft7Validator(workload_schema()).validate(item)
    path = tmp_path / "wl.json"
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [item]}))
    report = ingest_usage(folder, "kueue", path, now=NOW)
    assert dict(report.skipped) == {NOT_ADMITTED: (
        "p3/job-pretrain-4d5e6-7f8a9 (row 1, ran 7200 s before an eviction; counted once "
        "admitted again)",)}
    assert not report.written and not (folder / "usage.csv").exists()


def test_a_job_shorter_than_a_second_is_not_written_as_start_equals_end(tmp_path: Path):
    folder = scenario(tmp_path, usage=None)
    path = tmp_path / "sacct.txt"
    path.write_text("7|p1|h100-a|gres/gpu=1|2026-11-02T10:00:00|Unknown|RUNNING\n")
    report = ingest_usage(folder, "sacct", path, now=pd.Timestamp("2026-11-02T10:00:00.6Z"))
    assert list(report.skipped) == [NO_TIME] and not report.written
    later = ingest_usage(folder, "sacct", path, now=pd.Timestamp("2026-11-02T10:00:01.6Z"))
    assert usage_text(folder).splitlines()[1] == (
        "slurm:h100-a:7,p1,h100-a,1,2026-11-02T10:00:00Z,2026-11-02T10:00:01Z,running")
    assert later.added == ("slurm:h100-a:7",)
    load_scenario(folder)  # valid


@st.composite
def sacct_batches(draw) -> list[str]:
    """sacct lines of a few jobs: finished, running (End Unknown) or pending, some seen twice
    (running, then finished), some of unknown accounts or without GPUs."""
    lines = []
    for j in range(draw(st.integers(1, 6))):
        account = draw(st.sampled_from(["p1", "p2", P5, "nobody"]))
        partition = draw(st.sampled_from(["h100-a", "a100-b"]))
        tres = draw(st.sampled_from(["gres/gpu=2", "gres/gpu:h100=1,gres/gpu=1", "cpu=1"]))
        start = T0 + pd.Timedelta(hours=draw(st.integers(-800, 30)))
        end = start + pd.Timedelta(hours=draw(st.integers(0, 20)))
        head = f"{500 + j}|{account}|{partition}|{tres}"
        kind = draw(st.sampled_from(["finished", "running", "pending", "both"]))
        if kind in ("running", "both"):
            lines.append(f"{head}|{start:%Y-%m-%dT%H:%M:%S}|Unknown|RUNNING")
        if kind in ("finished", "both"):
            lines.append(f"{head}|{start:%Y-%m-%dT%H:%M:%S}|{end:%Y-%m-%dT%H:%M:%S}|COMPLETED")
        if kind == "pending":
            lines.append(f"{500 + j}|{account}|{partition}||Unknown|Unknown|PENDING")
    return lines


@settings(max_examples=15, deadline=None)
@given(sacct_batches(), st.randoms(use_true_random=False))
def test_ingesting_any_permutation_or_repetition_of_a_sacct_batch_gives_the_same_file(
        lines, rnd: random.Random):
    import tempfile

    now = T0 + pd.Timedelta(hours=40)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def ingested(name: str, files: list[list[str]]) -> bytes:
            folder = scenario(root / name)
            for i, chunk in enumerate(files):
                path = root / f"{name}-{i}.txt"
                path.write_text("".join(f"{line}\n" for line in chunk))
                ingest_usage(folder, "sacct", path, now=now)
            return (folder / "usage.csv").read_bytes()

        reference = ingested("a", [lines])
        shuffled = lines + rnd.sample(lines, k=len(lines) // 2)
        rnd.shuffle(shuffled)
        assert ingested("b", [shuffled]) == reference
        assert ingested("c", [shuffled[i::2] for i in range(2)] + [lines]) == reference


def test_the_report_names_the_first_jobs_of_a_long_list_and_counts_the_rest(tmp_path: Path):
    folder = scenario(tmp_path, usage=None)
    path = tmp_path / "cpu.txt"  # 60 CPU-only jobs
    path.write_text("".join(f"{n}|p1|h100-a|cpu=1|2026-11-01T00:00:00|2026-11-01T01:00:00|"
                            "COMPLETED\n" for n in range(1, 61)))
    report = ingest_usage(folder, "sacct", path, now=NOW)
    assert len(report.skipped[NO_GPU]) == 60
    (line,) = [x for x in report.lines() if "no GPU" in x]
    assert line.startswith("  skipped, no GPU (60): 1 (row 1, cpu=1), 2 (row 2, cpu=1)")
    assert line.endswith("50 (row 50, cpu=1) … and 10 more")


def test_sacct_with_qos_keeps_opportunistic_jobs_apart_and_charges_the_rest(tmp_path: Path):
    # the eighth field, QOS: p1's job under gp-opportunistic ran beyond its budget and is
    # charged to no budget (no GrpTRESMins in Slurm either), so it is reported, not
    # written; p2's job under its budget QOS is written as usual (4 GPUs x 12 h)
    path = tmp_path / "sacct.txt"
    path.write_text(
        "JobIDRaw|Account|Partition|AllocTRES|Start|End|State|QOS\n"
        "2001|p1|h100-a|gres/gpu=8|2026-11-01T00:00:00|2026-11-01T12:00:00|COMPLETED|"
        "gp-opportunistic\n"
        "2002|p2|h100-a|gres/gpu=4|2026-11-01T00:00:00|2026-11-01T12:00:00|COMPLETED|gp-p2\n")
    folder = scenario(tmp_path)
    report = ingest_usage(folder, "sacct", path, now=NOW)
    assert report.counts["added"] == 1
    assert dict(report.skipped) == {OPPORTUNISTIC: ("2001 (row 2, p1)",)}
    added = [line for line in usage_text(folder).splitlines() if line.startswith("slurm:")]
    assert added == ["slurm:h100-a:2002,p2,h100-a,4,2026-11-01T00:00:00Z,"
                     "2026-11-01T12:00:00Z,"]
    # ... but it is what p1 ran: unbudgeted.csv (usage.csv's columns) holds it, for the
    # executor contract's rule 8, and reads back as usage.csv's rows do
    assert (folder / "unbudgeted.csv").read_text().splitlines()[1:] == [
        "slurm:h100-a:2001,p1,h100-a,8,2026-11-01T00:00:00Z,2026-11-01T12:00:00Z,"]
    assert report.unbudgeted == ("slurm:h100-a:2001",) and report.unbudgeted_written
    assert any(line.startswith("  charged to no budget, to ") and line.endswith(
        "(1, written): slurm:h100-a:2001") for line in report.lines())
    from planner.inputs.load import load_unbudgeted

    spare = load_unbudgeted(folder)
    assert spare[["job_id", "project", "gpus"]].values.tolist() == [
        ["slurm:h100-a:2001", "p1", 8.0]]
    # a second ingest of the same file changes neither file
    again = ingest_usage(folder, "sacct", path, now=NOW)
    assert not again.written and not again.unbudgeted_written


def test_a_job_charged_to_no_budget_that_cannot_be_placed_is_reported_as_not_written(
        tmp_path: Path):
    # 2001 ran under gp-opportunistic for an account the scenario does not know: it cannot
    # be a row of unbudgeted.csv (no project), so the report says "unknown project", not
    # that it was written there; 2002 (p1, gp-overdrawn) is written as usual
    path = tmp_path / "sacct.txt"
    path.write_text(
        "JobIDRaw|Account|Partition|AllocTRES|Start|End|State|QOS\n"
        "2001|nobody|h100-a|gres/gpu=8|2026-11-01T00:00:00|2026-11-01T12:00:00|COMPLETED|"
        "gp-opportunistic\n"
        "2002|p1|h100-a|gres/gpu=2|2026-11-01T00:00:00|2026-11-01T06:00:00|COMPLETED|"
        "gp-overdrawn\n")
    folder = scenario(tmp_path)
    report = ingest_usage(folder, "sacct", path, now=NOW)
    assert report.unbudgeted == ("slurm:h100-a:2002",)
    assert report.skipped[OPPORTUNISTIC] == ("2002 (row 3, p1)",)
    (unknown,) = report.skipped[UNKNOWN_PROJECT]
    assert unknown.startswith("2001 (row 2")
    assert [row.split(",")[0] for row in
            (folder / "unbudgeted.csv").read_text().splitlines()[1:]] == ["slurm:h100-a:2002"]
