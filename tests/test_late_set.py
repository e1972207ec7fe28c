"""planner export --late uses only a set this plan's export wrote, read without hazards.

The set it rewrites is applied with ``kubectl apply --prune``: a truncated set would have
22 ClusterQueues deleted, ``nominalQuota: lots`` or a negative quota would be applied,
another scenario's set would prune this one. Each is refused (exit 2, the file, the
document, the path in it), nothing written; the sets the exporter and the cycle write,
and a set already widened by an earlier ``--late`` run, are taken. A FIFO or a device is
never opened for reading, and nesting or aliases no set holds are refused.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner.cli import main
from planner.exporters.kueue import file_name
from tests.test_pending import ITEMS, scenario, write

ROOT = Path(__file__).resolve().parents[1]


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture()
def exported(tmp_path: Path):
    """The tiny scenario planned and exported: (export args, the set in force, workloads)."""
    folder = scenario(tmp_path)
    assert main(["run", str(folder), "--out", str(tmp_path / "planned"), "--quiet"]) == 0
    plan_file = tmp_path / "planned" / "plan.json"
    args = ["export", str(plan_file), "--to", "kueue", "--scenario", str(folder)]
    assert main([*args, "--out", str(tmp_path / "applied")]) == 0
    plan = json.loads(plan_file.read_text())
    name = file_name(plan["periods"][0]["start"])
    return args, tmp_path / "applied" / name, write(tmp_path, ITEMS)


def late(args: list[str], applied: Path, workloads: Path, out: Path) -> int:
    return main([*args, "--out", str(out), "--late", str(applied), "--workloads",
                 str(workloads)])


def docs_of(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def rewritten(path: Path, docs: list[dict], name: str | None = None) -> Path:
    out = path.parent.parent / "edited" / (name or path.name)
    out.parent.mkdir(exist_ok=True)
    out.write_text(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))
    return out


def queue_gpu(doc: dict) -> dict:
    return doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]


def first_queue(docs: list[dict]) -> dict:
    return next(d for d in docs if d["kind"] == "ClusterQueue"
                and d["spec"]["resourceGroups"])


# --- what is taken ---------------------------------------------------------------------------


def test_the_set_late_wrote_is_taken_again_an_hour_later(exported, tmp_path):
    args, applied, wl = exported
    first, second = tmp_path / "first", tmp_path / "second"
    assert late(args, applied, wl, first) == 0
    assert (first / applied.name).read_text() != applied.read_text()  # widened
    assert late(args, first / applied.name, wl, second) == 0
    assert (second / applied.name).read_text() == (first / applied.name).read_text()


def test_the_set_a_cycle_widened_by_rule_6_is_taken(tmp_path, capsys):
    folder = scenario(tmp_path)
    # a cycle given --kueue plans from the queue: the hand rows become the declared ones
    (folder / "demand.csv").rename(folder / "declared_demand.csv")
    wl = write(tmp_path, ITEMS)
    state = tmp_path / "state"
    assert main(["cycle", str(folder), "--state", str(state), "--as-of", "2026-11-02",
                 "--kueue", str(wl), "--export", "kueue"]) == 0
    kept = state / "current"
    plan = json.loads((kept / "plan.json").read_text())
    name = file_name(plan["periods"][0]["start"])
    capsys.readouterr()
    assert main(["export", str(kept / "plan.json"), "--to", "kueue", "--scenario", str(folder),
                 "--workloads", str(wl), "--late", str(kept / "kueue" / name),
                 "--out", str(tmp_path / "late")]) == 0, capsys.readouterr().err


def test_a_per_cluster_set_is_taken(exported, tmp_path):
    args, applied, wl = exported
    assert main([*args, "--per-cluster", "--out", str(tmp_path / "split")]) == 0
    one = sorted((tmp_path / "split").glob("kueue-*-h100-a.yaml"))[0]
    assert late(args, one, wl, tmp_path / "late") == 0


# --- M9: sets this plan did not write ---------------------------------------------------------


def _truncated(docs):
    return docs[:len(docs) // 2]


def _lots(docs):
    queue_gpu(first_queue(docs))["nominalQuota"] = "lots"


def _negative(docs):
    queue_gpu(first_queue(docs))["nominalQuota"] = -8


def _more_gpus(docs):
    queue_gpu(first_queue(docs))["nominalQuota"] += 8  # GPUs no cluster has


def _other_scenario(docs):
    for d in docs:
        d["metadata"]["labels"]["gpu-planner.io/scenario"] = "other"


def _extra(docs):
    extra = json.loads(json.dumps(first_queue(docs)))
    extra["metadata"]["name"] = "intruder"
    docs.append(extra)


def _other_field(docs):
    first_queue(docs)["spec"]["preemption"]["withinClusterQueue"] = "Never"


def _other_window(docs):
    # the window is written on the pool Cohort alone
    pools = [d for d in docs if "gpu-planner.io/valid-from" in d["metadata"].get("annotations", {})]
    assert pools
    for d in pools:
        d["metadata"]["annotations"]["gpu-planner.io/valid-from"] = "2026-10-01T00:00:00Z"


def _not_ours(docs):
    del docs[0]["metadata"]["labels"]["app.kubernetes.io/managed-by"]


@pytest.mark.parametrize(("edit", "says"), [
    (_truncated, "object(s) this plan exports for the period"),
    (_lots, "nominalQuota: ClusterQueue p-5-116310a4: 'lots' is not a whole number of GPUs"),
    (_negative, "nominalQuota: ClusterQueue p-5-116310a4: -8 is not a whole number of GPUs"),
    (_more_gpus, "the export"),
    (_other_scenario, "a set of another scenario"),
    (_extra, "is no object this plan exports for the period"),
    (_other_field, "'Never', but the export wrote 'LowerPriority'"),
    (_other_window, "which is no period of this plan"),
    (_not_ours, "not a Kueue object written by gpu-planner"),
])
def test_a_set_this_plan_did_not_write_is_refused(exported, tmp_path, capsys, edit, says):
    args, applied, wl = exported
    docs = docs_of(applied)
    docs = edit(docs) or docs
    bad = rewritten(applied, docs)
    out = tmp_path / "out"
    capsys.readouterr()
    assert late(args, bad, wl, out) == 2
    err = flat(capsys.readouterr().err)
    assert f"error: {bad.name}" in err and says in err, err
    assert not out.exists()


def test_reserved_gpus_made_lendable_are_refused(exported, tmp_path, capsys):
    """A period with a reservation running: its queue keeps the reserved GPUs from lending."""
    args, applied, wl = exported
    assert main([*args, "--periods", "7", "--out", str(tmp_path / "week")]) == 0
    for path in sorted((tmp_path / "week").glob("kueue-*.yaml")):
        docs = docs_of(path)
        held = [r for d in docs if d["kind"] == "ClusterQueue"
                for g in d["spec"]["resourceGroups"] for f in g["flavors"]
                for r in f["resources"] if "lendingLimit" in r]
        if held:
            break
    else:
        raise AssertionError("no reservation runs in the tiny plan's first week")
    assert late(args, path, wl, tmp_path / "ok") == 0  # as exported: taken
    held[0]["lendingLimit"] = held[0]["nominalQuota"]
    capsys.readouterr()
    assert late(args, rewritten(path, docs), wl, tmp_path / "out") == 2
    assert "from lending, its reservations hold" in flat(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


# --- M3, M8: hazards in the files read -------------------------------------------------------


def _cli(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``planner ARGS`` in a process of at most 4 GiB (a file read without end fails fast)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit,
                          check=False)


def test_late_never_reads_a_device_or_waits_on_a_fifo(exported, tmp_path):
    args, _, wl = exported
    fifo = tmp_path / "set.yaml"
    os.mkfifo(fifo)
    for path, says in ((Path("/dev/zero"), "is a character device"),
                       (fifo, "is a named pipe (FIFO)")):
        done = _cli([*args, "--out", str(tmp_path / "out"), "--late", str(path),
                     "--workloads", str(wl)])
        assert done.returncode == 2, done.stderr[-500:]
        assert says in flat(done.stderr) and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "says"), [
    ("---\na: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64 levels"),
    ("---\na: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n", "holds an alias"),
    ("---\napiVersion: [\n", "not YAML"),
])
def test_late_refuses_yaml_no_set_holds(exported, tmp_path, capsys, text, says):
    args, _, wl = exported
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert late(args, bad, wl, tmp_path / "out") == 2
    assert says in flat(capsys.readouterr().err)


@pytest.mark.parametrize("where", ["export", "cycle"])
def test_deeply_nested_workloads_are_refused_by_export_and_cycle(exported, tmp_path, capsys,
                                                                 where):
    args, _, _ = exported
    deep = tmp_path / "deep.json"
    deep.write_text('{"items": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    if where == "export":
        code = main([*args, "--out", str(tmp_path / "out"), "--workloads", str(deep)])
    else:
        folder = Path(args[args.index("--scenario") + 1])
        code = main(["cycle", str(folder), "--state", str(tmp_path / "state"), "--as-of",
                     "2026-11-02", "--kueue", str(deep), "--export", "kueue"])
    assert code == 2
    err = flat(capsys.readouterr().err)
    assert "deep.json" in err and "nested deeper than 64 levels" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
