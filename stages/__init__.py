"""Stage families. Each module registers its stages with ``datapipe.stage.register``.

From Python: ``datapipe.stages.get("gopher_quality", min_words=50)`` is a configured stage, and
``stage.apply(texts)`` its signals and decisions on plain texts (``datapipe.api.stage_apply``).
"""
from datapipe.manifest.suggest import config_error, did_you_mean
from datapipe.stage import registry


def names() -> list[str]:
    """Names of every registered stage, sorted."""
    return sorted(registry())


def get(name: str, **config):
    """The registered stage ``name`` with ``config`` (its ``Config`` fields; defaults for the rest).

    The config is validated as a manifest's would be: an unknown field or a value out of range
    raises ValueError (one line per setting, the closest known setting named for a typo); an
    unknown ``name`` raises KeyError with the closest stage and the known ones. Models and lists
    load on first use (``apply`` or ``check()``).
    """
    from pydantic import ValidationError


    reg = registry()
    if name not in reg:
        raise KeyError(f"unknown stage {name!r}{did_you_mean(name, reg)}; known stages: {', '.join(sorted(reg))}")
    cls = reg[name]
    try:
        return cls(cls.Config(**config))
    except ValidationError as e:
        raise ValueError(config_error(name, e, cls.Config)) from None
