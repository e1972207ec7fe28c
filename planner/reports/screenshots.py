"""Render the report with the tools leadership opens it in: LibreOffice and Chromium.

Used by the system tests (``tests/test_report.py``) and by ``make screenshots``, which
writes the pictures of the front page and the docs::

    .venv/bin/python -m planner.reports.screenshots --out docs/images

- :func:`soffice_convert`: LibreOffice headless ``--convert-to`` (``pdf``, or ``xlsx`` to
  get a copy with every formula recalculated). Each call gets its own ``HOME`` and user
  profile in a temporary folder, so runs as root and in parallel do not collide.
- :func:`pdf_page_png`: one page of a PDF as PNG (poppler's ``pdftoppm``).
- :func:`html_screenshot`: headless Chromium's screenshot of an HTML file.

Nothing here plans: :func:`main` plans the bundled sample, writes the workbook and the
HTML, then renders them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOFFICE_TIMEOUT = 300.0  # seconds; a cold LibreOffice start on a busy 2-core machine is slow
CHROMIUM_TIMEOUT = 120.0
WORKBOOK_PNG = "report-workbook.png"
HTML_PNG = "report-html.png"


class RenderError(RuntimeError):
    """A rendering tool failed or did not write its output."""


def _run(command: list[str], timeout: float, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
    if done.returncode:
        raise RenderError(f"{command[0]} exited {done.returncode}: {done.stderr.strip()}")


def soffice_convert(source: Path, out_dir: Path, to: str,
                    timeout: float = SOFFICE_TIMEOUT) -> Path:
    """Convert ``source`` with LibreOffice headless into ``out_dir``; the new file's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{source.stem}.{to.split(':')[0]}"
    with tempfile.TemporaryDirectory(prefix="planner-soffice-") as home:
        env = {**os.environ, "HOME": home}
        _run(["soffice", f"-env:UserInstallation={Path(home, 'profile').as_uri()}",
              "--headless", "--norestore", "--convert-to", to, "--outdir", str(out_dir),
              str(source)], timeout, env)
    if not target.is_file() or not target.stat().st_size:
        raise RenderError(f"soffice wrote no {target.name} (converting {source.name} to {to})")
    return target


def pdf_page_png(pdf: Path, png: Path, page: int = 1, resolution: int = 60) -> Path:
    """Page ``page`` of ``pdf`` as a PNG at ``resolution`` dpi."""
    _run(["pdftoppm", "-png", "-r", str(resolution), "-f", str(page), "-l", str(page),
          "-singlefile", str(pdf), str(png.with_suffix(""))], CHROMIUM_TIMEOUT)
    if not png.is_file():
        raise RenderError(f"pdftoppm wrote no {png.name}")
    return png


def html_screenshot(page: Path, png: Path, width: int = 1200, height: int = 2600,
                    scale: float = 0.75, timeout: float = CHROMIUM_TIMEOUT) -> Path:
    """Headless Chromium's screenshot of the top of ``page``.

    The window is ``width`` × ``height`` CSS pixels (laptop-wide), drawn at ``scale``: the
    PNG is ``scale`` × that size.
    """
    with tempfile.TemporaryDirectory(prefix="planner-chromium-") as profile:
        _run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              "--no-first-run", f"--user-data-dir={profile}", f"--window-size={width},{height}",
              f"--force-device-scale-factor={scale:g}", f"--screenshot={png}",
              page.resolve().as_uri()], timeout)
    if not png.is_file() or not png.stat().st_size:
        raise RenderError(f"chromium wrote no {png.name}")
    return png


def png_size(png: Path) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    head = png.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        raise RenderError(f"{png.name} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def render(book: Path, page: Path, out_dir: Path, work: Path) -> tuple[Path, Path]:
    """The workbook's first page (via PDF) and the HTML's screenshot, as PNGs in ``out_dir``."""
    pdf = soffice_convert(book, work, "pdf")
    return (pdf_page_png(pdf, out_dir / WORKBOOK_PNG),
            html_screenshot(page, out_dir / HTML_PNG))


def main(argv: list[str] | None = None) -> int:
    """Plan the bundled sample and write the two screenshots (docs/images)."""
    from planner.config import load_model
    from planner.inputs.load import load_scenario
    from planner.reports.html import write_html
    from planner.reports.workbook import write_workbook
    from planner.run import SAMPLE, plan_scenario

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/images",
                        help="folder for the PNGs (default docs/images)")
    args = parser.parse_args(argv)
    missing = [t for t in ("soffice", "pdftoppm", "chromium") if shutil.which(t) is None]
    if missing:
        parser.error(f"not on PATH: {', '.join(missing)} (Debian: libreoffice-calc-nogui, "
                     "poppler-utils, chromium)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenario = load_scenario(SAMPLE)
    plan = plan_scenario(scenario, load_model("default")).plan.body
    with tempfile.TemporaryDirectory(prefix="planner-screenshots-") as tmp:
        work = Path(tmp)
        book = write_workbook(plan, scenario, work / "report.xlsx")
        page = write_html(plan, scenario, work / "report.html")
        started = time.perf_counter()
        for png in render(book, page, out, work):
            sys.stdout.write(f"{png} ({png.stat().st_size // 1024} KB)\n")
    sys.stdout.write(f"rendered in {time.perf_counter() - started:.1f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
