"""Stage families. Each module registers its stages with ``datapipe.stage.register``."""
import importlib

#: Modules imported by ``load_all``; a new stage module is added here.
STAGE_MODULES = [
    "datapipe.stages.extract",
    "datapipe.stages.langid",
    "datapipe.stages.gopher",
    "datapipe.stages.c4",
    "datapipe.stages.fineweb",
    "datapipe.stages.dedup_signatures",
    "datapipe.stages.safety",
    "datapipe.stages.profanity",
    "datapipe.stages.pii",
    "datapipe.stages.quality_classifier",
    "datapipe.stages.topic",
]


def load_all() -> None:
    for mod in STAGE_MODULES:
        importlib.import_module(mod)
