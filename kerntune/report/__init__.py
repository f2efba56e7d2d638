"""Run reports: best-so-far curves, parameter effects, top configs, failures and the
LLM's rounds of one run or one comparison, as one self-contained HTML file or as
Markdown with PNGs beside it (``kerntune report RUN``)."""

from kerntune.report.build import (
           Report,
           ReportFiles,
           build_report,
           default_report_path,
           write_report,
)
from kerntune.report.data import ReportData, load_report

__all__ = ["Report", "ReportData", "ReportFiles", "build_report", "default_report_path", "load_report",
           "write_report"]
