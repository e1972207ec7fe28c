"""MkDocs hook: the pages generated from code and result files, added when the site builds.

The reference pages come from :func:`planner.reference.pages` (the CLI parser, the plan's
JSON Schema, the model dataclasses, the executor contract, the trace and Slurm settings);
the Results pages from every ``benchmarks/results/*.json`` through
:func:`planner.results.result_markdown`. None of them is committed, so none goes stale.
"""

from __future__ import annotations

from mkdocs.structure.files import File, Files

from planner.reference import pages
from planner.results import read_results, result_markdown, results_index_markdown


def on_files(files: Files, config) -> Files:
    """Add the generated pages to the site's files."""
    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    bodies = read_results()
    for body in bodies:
        files.append(File.generated(config, f"results/{body['name']}.md",
                                    content=result_markdown(body)))
    files.append(File.generated(config, "results/index.md",
                                content=results_index_markdown(bodies)))
    return files
