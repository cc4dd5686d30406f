"""Turn a run's raw results into named figures, plain-language notes and Markdown tables."""

from bench.report.device_section import device_stats
from bench.report.document import build_figures, build_markdown, build_notes
from bench.report.trace_section import second_list_figures

__all__ = ["build_figures", "build_markdown", "build_notes", "device_stats", "second_list_figures"]
