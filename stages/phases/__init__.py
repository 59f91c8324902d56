"""Global phases: work over the whole run after phase 1 (dedup, mix + tokenize, exports, the report).

Each module registers a ``datapipe.phase.Phase``; the runner iterates them in the order below
and knows none by name. A new global step (decontamination, say) is one module added here.
"""
import importlib

#: Imported by ``load_all``, in run order.
PHASE_MODULES = [
    "datapipe.stages.phases.dedup.phase",
    "datapipe.stages.phases.publish",
    "datapipe.stages.phases.dolma_export",
    "datapipe.stages.phases.tokenize.phase",
    "datapipe.stages.phases.report",
]


def load_all() -> None:
    for mod in PHASE_MODULES:
        importlib.import_module(mod)
