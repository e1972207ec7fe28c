"""The docs site's reference pages, rendered from the definitions they describe.

Nothing here is typed twice: the CLI page walks the argparse parser of :mod:`planner.cli`,
the ``plan.json`` page walks ``planner/schemas/plan.schema.json`` (every property carries a
``description``), the model-file page reads the dataclasses of :mod:`planner.config` (their
fields, defaults and the comments beside them) and the bundled models, the executor
contract page renders :mod:`planner.contract`'s docstring and its ``PREEMPTS`` table, and
the trace and Slurm pages render :data:`planner.simulate.trace.TRACE_SCHEMA` and
:data:`planner.exporters.slurm.SLURM_CONF_LINES`. ``docs/hooks.py`` (MkDocs) adds
:func:`pages` to the site at build time, so a new command, flag, field or key appears in
the reference without anyone editing it. The input formats are rendered by
:func:`planner.inputs.schema.schema_markdown` into the committed ``docs/reference/inputs.md``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import MISSING, fields
from importlib import resources
from typing import Any

#: Generated pages, by their path inside the docs folder.
CLI_PAGE = "reference/cli.md"
PLAN_PAGE = "reference/plan-json.md"
MODEL_PAGE = "reference/model-files.md"
CONTRACT_PAGE = "reference/executor-contract.md"
TRACE_PAGE = "reference/trace-format.md"
SLURM_PAGE = "reference/slurm-conf.md"


def pages() -> dict[str, str]:
    """Every generated reference page: {path inside docs/: Markdown}."""
    return {CLI_PAGE: cli_markdown(), PLAN_PAGE: plan_markdown(), MODEL_PAGE: model_markdown(),
            CONTRACT_PAGE: contract_markdown(), TRACE_PAGE: trace_page_markdown(),
            SLURM_PAGE: slurm_conf_markdown()}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def rst_to_markdown(text: str) -> str:
    """A docstring's reST roles and literals as Markdown (``x`` and :func:`a.b` → `x`, `a.b`)."""
    text = re.sub(r":(?:func|class|data|meth|mod|attr):`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


# --------------------------------------------------------------------------- the CLI


def commands(parser: argparse.ArgumentParser,
             path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser,
                                                           str]]:
    """Every (sub)command of ``parser`` depth first: (its words, its parser, its help)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), sub, helps.get(name, "")
                yield from commands(sub, (*path, name))


def _is_group(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a command takes, in the parser's order (help and subcommands left out)."""
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)]


def _argument_row(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs != 0:
            names += f" `{action.metavar or action.dest.upper()}`"
    else:
        names = f"`{action.metavar or action.dest}`"
        if action.nargs == "?":
            names += " (optional)"
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        names += " one of " + ", ".join(f"`{c}`" for c in action.choices)
    notes = []
    if action.required and action.option_strings:
        notes.append("required")
    help_text = (action.help or "").replace("%(default)s", str(action.default))
    return f"| {names} | {_cell(help_text)} | {', '.join(notes)} |"


def _anchor(words: tuple[str, ...]) -> str:
    return "planner-" + "-".join(words)


def cli_markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """Every ``planner`` command and its arguments, from the argparse parser itself."""
    if parser is None:
        from planner.cli import _parser

        parser = _parser()
    out = ["# The `planner` command", "",
           "Generated from the argparse parser of `planner/cli.py` when the site is built: "
           "every command and flag the program accepts, with its own help text. "
           "`planner COMMAND --help` prints the same. A mistyped command or option exits 2 "
           "naming the closest one; bad input exits 2 with one line per problem, naming the "
           "file, row and column; a plan that cannot be made valid exits 1 and writes "
           "nothing.", "", f"`{parser.format_usage().strip().removeprefix('usage: ')}`", "",
           rst_to_markdown(parser.description or ""), "", "| command | what it does |",
           "|---|---|"]
    listed = list(commands(parser))
    for words, _sub, help_text in listed:
        out.append(f"| [`planner {' '.join(words)}`](#{_anchor(words)}) | {_cell(help_text)} |")
    out += ["", "Options of `planner` itself:", "", "| argument | meaning | |", "|---|---|---|"]
    out += [_argument_row(a) for a in arguments(parser)]
    for words, sub, help_text in listed:
        out += ["", f"## `planner {' '.join(words)}` {{#{_anchor(words)}}}", "",
                _cell(help_text[:1].upper() + help_text[1:]) + ".", ""]
        usage = " ".join(sub.format_usage().split()).removeprefix("usage: ")
        out += [f"```text\n{usage}\n```", ""]
        if _is_group(sub):
            out.append("Subcommands: " + ", ".join(
                f"[`{w[-1]}`](#{_anchor(w)})" for w, _, _ in commands(sub, words)
                if len(w) == len(words) + 1) + ".")
            continue
        args = arguments(sub)
        if args:
            out += ["| argument | meaning | |", "|---|---|---|"]
            out += [_argument_row(a) for a in args]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- plan.json


def plan_schema() -> dict[str, Any]:
    """``planner/schemas/plan.schema.json``, as shipped in the package."""
    text = resources.files("planner").joinpath("schemas/plan.schema.json").read_text("utf-8")
    return json.loads(text)


def _resolve(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref and ref.startswith("#/$defs/"):
        target = schema["$defs"][ref.removeprefix("#/$defs/")]
        return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type_text(node: dict[str, Any]) -> str:
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    kind = node.get("type", "")
    kinds = kind if isinstance(kind, list) else [kind]
    text = " or ".join(k for k in kinds if k)
    if node.get("pattern") == r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$":
        text = "UTC time `YYYY-MM-DDTHH:MM:SSZ`"
    if kind == "array" and "items" in node and node["items"].get("type") != "object":
        text = f"array of {node['items'].get('type', 'values')}"
    bounds = [f"{sign} {node[key]:g}" for key, sign in (
        ("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
        ("exclusiveMaximum", "<")) if key in node]
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def schema_fields(node: dict[str, Any], schema: dict[str, Any],
                  prefix: str = "") -> Iterator[tuple[str, dict[str, Any], bool]]:
    """Every property of ``node``, depth first: (its path, its schema, whether required)."""
    node = _resolve(node, schema)
    required = set(node.get("required", ()))
    for name, child in node.get("properties", {}).items():
        child = _resolve(child, schema)
        path = f"{prefix}{name}"
        yield path, child, name in required
        if child.get("type") == "object" and "properties" in child:
            yield from schema_fields(child, schema, f"{path}.")
        elif child.get("type") == "array" and "properties" in child.get("items", {}):
            yield from schema_fields(child["items"], schema, f"{path}[].")
        elif child.get("type") == "object" and "additionalProperties" in child:
            extra = child["additionalProperties"]
            if isinstance(extra, dict) and "properties" in extra:
                yield from schema_fields(extra, schema, f"{path}.<key>.")


def plan_markdown(schema: dict[str, Any] | None = None) -> str:
    """``plan.json``'s fields, from its JSON Schema: path, type, required, meaning."""
    schema = plan_schema() if schema is None else schema
    out = [f"# `plan.json` (schema version {schema['properties']['schema_version']['const']})",
           "", "Generated from `planner/schemas/plan.schema.json` when the site is built. "
           "The same inputs and options give the same bytes; no clock time is written. "
           "`planner check PLAN [SCENARIO]` re-checks a plan against its scenario's hard "
           "rules; what the fields put in force for an executor is the "
           "[executor contract](executor-contract.md).", "",
           rst_to_markdown(schema.get("description", "")), "",
           "| field | type | required | meaning |", "|---|---|---|---|"]
    for path, node, required in schema_fields(schema, schema):
        out.append(f"| `{path}` | {_cell(_type_text(node))} | {'yes' if required else ''} | "
                   f"{_cell(node.get('description', ''))} |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- model files


def _field_comments(cls: type) -> dict[str, str]:
    """The comment beside (or just above) each field in ``cls``'s source."""
    comments: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# ").rstrip())
            continue
        match = re.match(r"(\w+):[^#]*(?:#\s*(.*))?$", stripped)
        if match:
            beside = match.group(2) or ""
            comments[match.group(1)] = (beside or " ".join(above)).strip()
        above = []
    return comments


def _toml_value(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return f"{value:g}" if isinstance(value, float) else str(value)


def model_markdown() -> str:
    """Every key a model ``.toml`` may hold, its type, default and the bundled models' values."""
    from planner.config import _SECTIONS, ModelConfig, bundled_models

    bundled = {name: tomllib.loads(entry.read_text("utf-8"))
               for name, entry in sorted(bundled_models().items())}
    names = list(bundled)
    out = ["# Model files (`--model FILE.toml`)", "",
           "Generated from the dataclasses of `planner/config.py` (their fields, defaults and "
           "the comments beside them) and the bundled models when the site is built. A model "
           "file may set any of these keys; an unknown key, a wrong type, a number that is not "
           "finite or weights that would let a soft goal outweigh a hard rule exit 2 naming "
           "the file, line and key. A key left out takes the default. How to write one: "
           "[the how-to](../how-to/write-a-model-file.md); what the weights mean: "
           "[the model](../explanation/model.md).", "",
           "| key | type | default | " + " | ".join(f"`{n}`" for n in names) + " | meaning |",
           "|---|---|---|" + "---|" * len(names) + "---|"]
    top = {f.name: f for f in fields(ModelConfig)}
    for key in ("name", "description"):
        values = " | ".join(_cell(_toml_value(bundled[n].get(key))) for n in names)
        out.append(f"| `{key}` | {top[key].type} | {_cell(_toml_value(top[key].default))} | "
                   f"{values} | {_cell(_field_comments(ModelConfig).get(key, ''))} |")
    for section, cls in _SECTIONS.items():
        comments = _field_comments(cls)
        for f in fields(cls):
            default = f.default if f.default is not MISSING else None
            values = " | ".join(_cell(_toml_value(bundled[n].get(section, {}).get(f.name)))
                                for n in names)
            kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", f.type)
            out.append(f"| `{section}.{f.name}` | {_cell(kind)} | "
                       f"{_cell(_toml_value(default))} | {values} | "
                       f"{_cell(rst_to_markdown(comments.get(f.name, '')))} |")
    out += ["", "A `–` in a bundled model's column: the model leaves the key out and takes the "
            "default (for `lookback.window_days`, the scenario's `lookback_days`)."]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- the contract


def contract_markdown() -> str:
    """The executor contract's rules (``planner/contract.py``) and its preemption table."""
    from planner import contract

    doc = rst_to_markdown(inspect.getdoc(contract) or "")
    title, _, body = doc.partition("\n\n")
    out = ["# The executor contract", "",
           "Generated from `planner/contract.py` when the site is built: its rules as the "
           "module states them, the table every executor reads, and the functions that "
           "compute each term. Why each rule exists: "
           "[the explanation](../explanation/executor-contract.md).", "",
           f"*{title.strip()}*", "", body, "", "## What may preempt what (`PREEMPTS`)", "",
           "| class | may preempt, in this order | never preempted once running |",
           "|---|---|---|"]
    for job_class, victims in contract.PREEMPTS.items():
        order = ", then ".join(f"`{v}`" for v in victims) or "nothing"
        never = "yes" if job_class in contract.NEVER_PREEMPTED else ""
        out.append(f"| `{job_class}` | {order} | {never} |")
    out += ["", "## The job classes (`JobClass`)", "", "| class | meaning |", "|---|---|"]
    source = inspect.getsource(contract.JobClass)
    for job_class in contract.JobClass:
        match = re.search(rf'{job_class.name} = "{job_class.value}"\s*#\s*(.*)', source)
        out.append(f"| `{job_class}` | {_cell(match.group(1) if match else '')} |")
    out += ["", "## Functions", "", "| function | what it returns |", "|---|---|"]
    for name, member in inspect.getmembers(contract, inspect.isfunction):
        if name.startswith("_") or member.__module__ != contract.__name__:
            continue
        summary = (inspect.getdoc(member) or "").split("\n\n")[0].replace("\n", " ")
        out.append(f"| `{name}{inspect.signature(member)}` | "
                   f"{_cell(rst_to_markdown(summary))} |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- traces, Slurm


def trace_page_markdown() -> str:
    """The trace columns (``planner/simulate/trace.py``'s ``TRACE_SCHEMA``)."""
    from planner.simulate.trace import trace_markdown

    return "\n".join([
        "# Trace format", "",
        "A trace is a CSV of jobs to replay on a scenario (`planner simulate`): who submits "
        "what, where and when. Generated from `TRACE_SCHEMA` in `planner/simulate/trace.py` "
        "when the site is built. Cells are read like scenario cells (ids verbatim, ISO 8601 "
        "times, naive = UTC; bools `true`/`false` or `1`/`0`); a bad trace exits 2 with "
        "every problem at once, naming the file, row (header = row 1) and column. How to "
        "make one: [replay a trace](../how-to/replay-a-trace.md).", "", trace_markdown()])


def slurm_conf_markdown() -> str:
    """What slurm.conf must hold for the Slurm export (``SLURM_CONF_LINES``)."""
    from planner.exporters.slurm import SLURM_CONF_LINES

    return "\n".join([
        "# slurm.conf for the Slurm export", "",
        "`slurm-apply.sh` cannot write `slurm.conf`; its header lists what the cluster's "
        "must hold for the budgets, the pace caps, the preemption and the reservations to "
        "work, and a partition per cluster of the plan, named as the cluster. Generated "
        "from `SLURM_CONF_LINES` in `planner/exporters/slurm.py` when the site is built; "
        "the script's header and the test Slurm hold the very same lines.", "",
        "```", *SLURM_CONF_LINES, "```", "",
        "One line more depends on the plan: `PriorityDecayHalfLife=` the plan's "
        "`contract.fair_share_half_life_hours` in whole minutes (`2-10:13:00` for a 7-day "
        "lookback), so that Fair Tree forgets usage as the plan's fair share does; a plan "
        "without the field leaves the line out. Why each line: "
        "[how Slurm enforces a plan](../explanation/slurm.md).", ""])
