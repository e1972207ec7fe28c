"""The docs stay true: generated pages match the code, the site builds strictly, commands run.

- the committed ``docs/reference/inputs.md`` is the rendered input schema;
- ``mkdocs build --strict`` passes (no broken link or anchor) and the built CLI reference
  names every command and flag of the parser;
- every field of ``plan.json``'s schema and every model key has a meaning;
- the README is a front page (≤ 400 lines, no commit hashes, links that resolve);
- the shell blocks marked ``<!-- runnable -->`` in the README, the tutorials and the how-to
  guides run, in order, in a temporary copy of the sample; an ``<!-- output -->`` block
  after one holds lines of what it printed;
- the Results pages are rendered from every result file, with its provenance.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import _parser
from planner.inputs.schema import schema_markdown
from planner.reference import (
    arguments,
    cli_markdown,
    commands,
    model_markdown,
    pages,
    plan_schema,
    schema_fields,
)
from planner.results import read_results, result_markdown, table_markdown, write_result

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DOCS = ROOT / "docs"
RUNNABLE = "<!-- runnable -->"
OUTPUT = "<!-- output -->"


def test_docs_reference_inputs_md_is_the_rendered_schema():
    # regenerate with: .venv/bin/python -c "from planner.inputs.schema import schema_markdown;
    #   import sys; sys.stdout.write(schema_markdown())" > docs/reference/inputs.md
    assert (DOCS / "reference" / "inputs.md").read_text(encoding="utf-8") == schema_markdown()


def test_readme_names_both_setup_commands_and_ci_calls_the_test_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make run" in readme and "make test" in readme
    assert "make docs" in readme and "make serve-docs" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


# --------------------------------------------------------------------------- the reference


def _sections(markdown: str) -> dict[str, str]:
    """The CLI page's sections by command: {"run": text, "trace philly": text, …}."""
    parts = re.split(r"^## `planner ([^`]*)`.*$", markdown, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_cli_command_and_flag_is_in_the_reference():
    parser = _parser()
    sections = _sections(cli_markdown(parser))
    listed = list(commands(parser))
    assert {" ".join(words) for words, _, _ in listed} == set(sections)
    for words, sub, _ in listed:
        text = sections[" ".join(words)]
        for action in arguments(sub):
            names = action.option_strings or [action.metavar or action.dest]
            for name in names:
                assert f"`{name}`" in text, (words, name)
            if action.help and action.help != argparse.SUPPRESS:
                assert action.help.split()[0] in text, (words, action.help)
    # a command added to the parser appears without anyone editing the page
    extra = _parser()
    sub = next(a for a in extra._actions if isinstance(a, argparse._SubParsersAction))
    new = sub.add_parser("frobnicate", help="a command made up by this test")
    new.add_argument("--knob", help="turns the knob")
    assert "`--knob`" in _sections(cli_markdown(extra))["frobnicate"]


def test_every_plan_field_and_model_key_has_a_meaning():
    schema = plan_schema()
    missing = [path for path, node, _ in schema_fields(schema, schema)
               if not node.get("description")]
    assert missing == []
    page = pages()["reference/plan-json.md"]
    for path, _, _ in schema_fields(schema, schema):
        assert f"| `{path}` |" in page
    for line in model_markdown().splitlines():
        if line.startswith("| `"):
            assert line.rstrip(" |").split("|")[-1].strip(), line  # the meaning column


def test_the_contract_page_renders_every_class_and_the_preemption_table():
    from planner.contract import PREEMPTS, JobClass

    page = pages()["reference/executor-contract.md"]
    for job_class in JobClass:
        assert f"| `{job_class}` |" in page
    assert "`guaranteed` | `unallocated`, then `fill`, then `opportunistic`" in page
    assert len(PREEMPTS) == len(JobClass)
    assert ":func:" not in page and "``" not in page


@pytest.mark.slow
def test_the_site_builds_strictly_and_its_cli_page_names_every_flag(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    html = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for words, sub, _ in commands(_parser()):
        assert f"planner {' '.join(words)}" in html
        for action in arguments(sub):
            for name in action.option_strings:
                assert f"<code>{name}</code>" in html, name
    for body in read_results():
        page = (site / "results" / body["name"] / "index.html").read_text(encoding="utf-8")
        assert body["commit"] in page and body["title"].split(":")[0] in page


# --------------------------------------------------------------------------- the README


def test_the_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    # no history: no commit hashes (7+ hex digits with a digit and a letter)
    hashes = [h for h in re.findall(r"\b[0-9a-f]{7,12}\b", text)
              if re.search(r"\d", h) and re.search(r"[a-f]", h)]
    assert hashes == []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / target).exists(), target
    for word in ("NGH", "guaranteed", "opportunistic", "pace", "lookback", "reservation"):
        assert re.search(rf"^\*\*{word}", text, flags=re.M | re.I), word  # the glossary


# --------------------------------------------------------------------------- runnable blocks


def runnable_blocks(text: str) -> list[tuple[str, str | None]]:
    """The ``sh`` blocks marked runnable, each with the ``<!-- output -->`` block after it."""
    blocks = []
    pattern = re.compile(r"^(<!-- (?:runnable|output) -->)\n```[a-z]*\n(.*?)^```", re.M | re.S)
    for match in pattern.finditer(text):
        if match.group(1) == RUNNABLE:
            blocks.append((match.group(2), None))
        elif blocks and blocks[-1][1] is None:
            blocks[-1] = (blocks[-1][0], match.group(2))
    return blocks


def _normal(line: str) -> str:
    """A line with its timings blanked: seconds move from run to run, nothing else does."""
    return re.sub(r"\d+(?:\.\d+)? s\b", "N s", line.rstrip())


# every page of the README, the tutorials and the how-to guides that has a runnable block
DOC_FILES = [p for p in [ROOT / "README.md", *sorted((DOCS / "tutorials").glob("*.md")),
                         *sorted((DOCS / "how-to").glob("*.md"))]
             if RUNNABLE in p.read_text(encoding="utf-8")]


def test_runnable_blocks_are_found():
    blocks = runnable_blocks("<!-- runnable -->\n```sh\necho a\n```\n\n<!-- output -->\n"
                             "```text\na\n```\n\n```sh\nnot marked\n```\n")
    assert blocks == [("echo a\n", "a\n")]
    assert runnable_blocks((ROOT / "README.md").read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_shell_blocks_run_on_the_sample(doc, tmp_path):
    blocks = runnable_blocks(doc.read_text(encoding="utf-8"))
    assert blocks, "a runnable marker without a fenced block after it"
    work = tmp_path / "checkout"
    shutil.copytree(ROOT / "data", work / "data", ignore=shutil.ignore_patterns("__pycache__"))
    (work / ".venv").symlink_to(BIN.parent)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "TZ": "UTC",
           "COLUMNS": "200", "NO_COLOR": "1"}
    for script, expected in blocks:
        done = subprocess.run(["bash", "-eu", "-c", script], cwd=work, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{script}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        if expected is not None:
            printed = {_normal(line) for line in (done.stdout + done.stderr).splitlines()}
            for line in expected.splitlines():
                if line.strip() and line.strip() != "...":
                    assert _normal(line) in printed, f"{script}: {line!r} not printed"


# --------------------------------------------------------------------------- results


def test_a_result_renders_its_table_arrows_notes_and_provenance(tmp_path):
    columns = [{"key": "case", "label": "case"},
               {"key": "cpu_s", "label": "CPU s", "unit": "s", "better": "lower"},
               {"key": "ratio", "label": "delivered ÷ owed", "better": "higher"}]
    path = write_result("demo", title="Demo", what="what was measured", columns=columns,
                        rows=[{"case": "a|b", "cpu_s": 1234.5, "ratio": None}],
                        notes=["a fact"], command="python bench.py", folder=tmp_path)
    (body,) = read_results(tmp_path)
    assert body["name"] == "demo" and path.name == "demo.json"
    page = result_markdown(body)
    assert "| case | CPU s ↓ | delivered ÷ owed ↑ |" in page
    assert "| a\\|b | 1,234.5 | – |" in page  # a pipe stays inside its cell
    assert "↑ higher is better, ↓ lower is better" in page
    assert "- a fact" in page and "`python bench.py`" in page and body["commit"] in page
    assert table_markdown(columns[:1], []) == "| case |\n|---|\n"


def test_every_committed_result_file_is_complete_and_renders():
    bodies = read_results()
    for body in bodies:
        keys = [c["key"] for c in body["columns"]]
        assert body["rows"], body["name"]
        assert all(set(row) <= set(keys) for row in body["rows"]), body["name"]
        assert body["date"].endswith("Z") and body["machine"].get("cores")
        page = result_markdown(body)
        assert body["command"] in page and body["commit"] in page
        assert json.loads((ROOT / "benchmarks" / "results" / f"{body['name']}.json")
                          .read_text(encoding="utf-8"))["name"] == body["name"]


def test_the_code_cites_the_docs_not_the_readme():
    # measured figures live in result files and rules in docstrings; the README is a front
    # page, so no module sends its reader there
    cited = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "planner").rglob("*.py"))
             if "README" in p.read_text(encoding="utf-8")]
    assert cited == []


def test_a_wide_result_is_rendered_turned_one_line_per_figure(tmp_path):
    columns = [{"key": "policy", "label": "policy"}] + [
        {"key": f"m{i}", "label": f"figure {i}", "better": "higher"} for i in range(12)]
    rows = [{"policy": p, **{f"m{i}": i / 10 for i in range(12)}} for p in ("a", "b")]
    write_result("wide", title="Wide", what="w", columns=columns, rows=rows, folder=tmp_path)
    page = result_markdown(read_results(tmp_path)[0])
    assert "| policy | a | b |" in page and "| figure 3 ↑ | 0.3 | 0.3 |" in page


@pytest.mark.slow
def test_planner_simulate_writes_a_result_file_the_docs_render(tmp_path):
    from planner.cli import main

    trace = tmp_path / "trace.csv"
    assert main(["trace", "synthetic", str(ROOT / "data" / "sample"), "--seed", "3",
                 "--jobs", "8000", "--out", str(trace)]) == 0
    result = tmp_path / "results" / "replay-small.json"
    assert main(["simulate", str(ROOT / "data" / "sample"), "--trace", str(trace),
                 "--policy", "quota,priority", "--out", str(tmp_path / "sim"),
                 "--result", str(result)]) == 0
    (body,) = read_results(result.parent)
    assert [r["policy"] for r in body["rows"]] == ["quota", "priority"]
    metrics = json.loads((tmp_path / "sim" / "metrics.json").read_text())["policies"]
    assert body["rows"][0]["occupancy"] == round(metrics["quota"]["occupancy"], 3)
    assert body["rows"][1]["preemptions"] == metrics["priority"]["preemptions"]
    assert body["command"].startswith("planner simulate ") and "--result" in body["command"]
    page = result_markdown(body)
    assert "occupancy ↑" in page and "budget error mean ↓" in page and "trace.csv" in page
