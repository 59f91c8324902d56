"""Stage families. Each module registers its stages with ``datapipe.stage.register``.

From Python: ``datapipe.stages.get("gopher_quality", min_words=50)`` is a configured stage, and
``stage.apply(texts)`` its signals and decisions on plain texts (``datapipe.api.stage_apply``).
"""
import importlib

#: Modules imported by ``load_all``; a new stage module is added here.
STAGE_MODULES = [
    "datapipe.stages.extract",
    "datapipe.stages.langid",
    "datapipe.stages.gopher",
    "datapipe.stages.c4",
    "datapipe.stages.fineweb",
    "datapipe.stages.dedup_signatures",
    "datapipe.stages.url_blocklist",
    "datapipe.stages.ldnoobw",
    "datapipe.stages.safety",
    "datapipe.stages.profanity",
    "datapipe.stages.pii",
    "datapipe.stages.decontam",
    "datapipe.stages.quality_classifier",
    "datapipe.stages.topic",
]


def load_all() -> None:
    for mod in STAGE_MODULES:
        importlib.import_module(mod)


def names() -> list[str]:
    """Names of every registered stage, sorted."""
    from datapipe.stage import registry

    return sorted(registry())


def get(name: str, **config):
    """The registered stage ``name`` with ``config`` (its ``Config`` fields; defaults for the rest).

    The config is validated as a manifest's would be: an unknown field or a value out of range
    raises ValueError (one line per setting, the closest known setting named for a typo); an
    unknown ``name`` raises KeyError with the closest stage and the known ones. Models and lists
    load on first use (``apply`` or ``check()``).
    """
    from pydantic import ValidationError

    from datapipe.manifest.suggest import config_error, did_you_mean
    from datapipe.stage import registry

    reg = registry()
    if name not in reg:
        raise KeyError(f"unknown stage {name!r}{did_you_mean(name, reg)}; known stages: {', '.join(sorted(reg))}")
    cls = reg[name]
    try:
        return cls(cls.Config(**config))
    except ValidationError as e:
        raise ValueError(config_error(name, e, cls.Config)) from None
