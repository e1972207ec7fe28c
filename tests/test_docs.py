"""Documentation that is generated from code stays in step with it."""

from pathlib import Path

from planner.inputs.schema import schema_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_docs_inputs_md_is_the_rendered_schema():
    # regenerate with: .venv/bin/python -c "from planner.inputs.schema import schema_markdown;
    #   import sys; sys.stdout.write(schema_markdown())" > docs/inputs.md
    assert (ROOT / "docs" / "inputs.md").read_text(encoding="utf-8") == schema_markdown()


def test_readme_names_both_setup_commands_and_ci_calls_the_test_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make run" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
