"""The HTML report: one self-contained page (style, script, figures and data inlined) that opens offline.

A Content-Security-Policy forbids every network access, so the page can neither fetch nor leak anything; its
script reads the layers from one JSON document in the page, fills the sortable and filterable layer table, and
ties each table row to the layer's points in the figures (hover names a point's layer, a click highlights).
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from onnxroof.atomic import write_text
from onnxroof.errors import UserError
from onnxroof.predict.analysis import Analysis
from onnxroof.report.embedded import EmbeddedFigure
from onnxroof.report.html_data import page_data, script_json
from onnxroof.report.html_figures import figure_section
from onnxroof.report.html_sections import (
    devices_section,
    op_type_section,
    summary_section,
    table_section,
    validation_section,
    warnings_section,
)

if TYPE_CHECKING:
    from onnxroof.ort.validate import Validation

__all__ = ["CONTENT_SECURITY_POLICY", "build_report", "write_report"]

# No source is allowed for anything (default-src 'none'); the page's own inline style and script run, and images
# may only be data: URIs. base-uri and form-action do not fall back to default-src, so they are closed too.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)


@cache
def _asset(name: str) -> str:
    """A file of the report's assets (style sheet, script), read from the installed package."""
    return resources.files("onnxroof.report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def _page_title(analyses: Sequence[Analysis], title: str | None) -> str:
    if title:
        return title
    models = list(dict.fromkeys(a.model for a in analyses))
    devices = list(dict.fromkeys(a.device.label() for a in analyses))
    return f"{', '.join(models)} on {', '.join(devices)}: onnxroof report"


def _nav(has_validation: bool) -> str:
    links = [
        ("summary", "Summary"),
        ("devices", "Devices"),
        ("figures", "Figures"),
        ("layers", "Layers"),
        ("op-types", "By op type"),
        ("warnings", "Unsupported and warnings"),
    ]
    if has_validation:
        links.append(("validation", "Predicted vs measured"))
    return "<nav>" + "".join(f'<a href="#{anchor}">{text}</a>' for anchor, text in links) + "</nav>"


def build_report(
    analyses: Sequence[Analysis],
    figures: Sequence[EmbeddedFigure] = (),
    validation: Validation | None = None,
    *,
    title: str | None = None,
) -> str:
    """The report page for one or more analyses (a model on several devices, or several models), with the given
    figures and, when ``validation`` is given, its measured times next to the predictions. Pure: returns the
    page's text. A validation whose analysis is not among ``analyses`` adds it, so that its measured times have
    layers to sit beside."""
    chosen = validation.beside(analyses) if validation is not None else list(analyses)
    if not chosen:
        raise UserError("a report needs at least one analysis", "pass the analysis of a model on a device")
    heading = _page_title(chosen, title)
    body = "".join(
        [
            f"<header><h1>{html.escape(heading)}</h1>{_nav(validation is not None)}</header><main>",
            summary_section(chosen),
            devices_section(chosen),
            figure_section(list(figures)),
            table_section(chosen),
            op_type_section(chosen),
            warnings_section(chosen, validation),
            validation_section(validation),
            "</main>",
        ]
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{html.escape(heading)}</title><style>{_asset('report.css')}</style></head>\n<body>{body}"
        '<div id="tooltip" role="tooltip" hidden></div>'
        f'<script type="application/json" id="report-data">{script_json(page_data(chosen, validation))}</script>'
        f"<script>{_asset('report.js')}</script></body></html>\n"
    )


def write_report(path: str | os.PathLike[str], page: str, *, force: bool = False) -> None:
    """Write the page to ``path`` atomically; an existing file is replaced only with ``force``."""
    target = Path(path)
    if target.is_dir():
        raise UserError(f"{target} is a folder", "give a file name for the report, such as report.html")
    if target.exists() and not force:
        raise UserError(f"{target} already exists", "pass --force to replace it, or choose another path")
    if not target.parent.is_dir():
        raise UserError(f"no folder {target.parent} to write {target.name} in", "create the folder first")
    write_text(target, page)
