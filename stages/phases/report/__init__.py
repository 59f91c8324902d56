"""Phase ``report``: ``OUTPUT/report.html``, the run explained (funnel, reasons, languages, dedup
clusters, tokens per domain, time per stage; see datapipe.stages.phases.report.html). Section ``report:``
(``enabled: false`` skips it, e.g. in tests; ``histograms: true`` also draws one histogram per
signal column, which ``datapipe report RUN_DIR`` does on demand). Reads every output, so any change
redraws it; a failure to draw is a warning, never a failed run."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from datapipe.io.parquet import fs_and_path
from datapipe.phase import Dataset, Phase, PhaseContext, PhaseResult, register_phase

#: The report's file name in the run folder.
REPORT_FILE = "report.html"


class ReportConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    #: Histograms' y axis: ``auto`` (log when kept and rejected counts differ 20x), ``always``, ``never``.
    log_y: Literal["auto", "always", "never"] = "auto"
    #: One histogram per numeric signal column, thresholds drawn (about 40 plots on the main chain,
    #: 0.1-0.3 s each: most of a small run's fixed cost). Off: the run lists the columns
    #: and ``datapipe report RUN_DIR`` draws them.
    histograms: bool = False


@register_phase
class ReportPhase(Phase):
    name = "report"
    sections = {"report": ReportConfig}
    reads = ("*",)
    writes = (Dataset("report", "", REPORT_FILE, "report"),)
    optional = True  # a failure is logged, the run goes on

    @classmethod
    def enabled(cls, manifest) -> bool:
        cfg = manifest.section("report")
        return cfg is None or cfg.enabled

    def outputs_present(self, ctx: PhaseContext) -> bool:

        fs, p = fs_and_path(ctx.url(REPORT_FILE), ctx.storage_options)
        return fs.exists(p)

    def run(self, ctx: PhaseContext) -> PhaseResult:
        # Lazy: matplotlib and DuckDB load when a report is drawn, not with the manifest.
        from datapipe.stages.phases.report import html

        ctx.progress("draw the report")
        cfg = self.manifest.section("report") or ReportConfig()
        return PhaseResult(stats={"path": html.write_report(ctx.output, storage_options=ctx.storage_options,
                                                       log_y=cfg.log_y, histograms=cfg.histograms)})
