"""The built-in global phases: dedup, publish, the Dolma export, mix + tokenize, the report.

Each module registers a ``datapipe.phase.Phase``. The runner orders them by the datasets they
declare (``datapipe.phase.run_order``) and knows none by name. A phase in another package is
found through the entry-point group ``datapipe.phases`` and needs no change here.
"""
import importlib

#: The built-in phase modules (imported by ``load_all``; their order does not matter).
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
