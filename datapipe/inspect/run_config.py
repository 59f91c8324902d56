"""The configuration a finished run applied: every stage's and phase's settings, defaults filled in.

``ledger.json`` records them (``stage_configs``, ``phase_configs``, written by the runner); runs
written before that kept only the manifest's own values (``{}`` for a stage left at its
defaults), so those are completed here from the stage's ``Config`` class. ``inspect`` and the
report show what this returns.
"""
from __future__ import annotations

from datapipe.inspect.reader import Run
from datapipe.phase import phases, read_marker, section_classes
from datapipe.stage import registry


def effective_stage_configs(run: Run) -> list[tuple[str, dict]]:
    """``[(stage name, config dict with every field)]`` in chain order. A stage this datapipe
    does not know, or a config it no longer accepts, is returned as recorded."""

    reg = registry()
    out = []
    for name, cfg in run.stage_configs():
        try:
            full = reg[name].Config(**(cfg or {})).model_dump(mode="json")
        except Exception:  # noqa: BLE001 - unknown stage or changed config class: show what was recorded
            full = dict(cfg or {})
        out.append((name, full))
    return out


def effective_phase_configs(run: Run) -> dict[str, dict]:
    """``{phase: {section: config}}`` from ``ledger.json``, else from the phase markers' ``config``.

    A section recorded as null (older ledgers; a phase such as ``report`` run without its section)
    is its class's defaults, and dedup's ``minhash.bands``/``rows`` left null in the manifest are
    the values the phase chose (its stats): the settings in force, not the manifest's spelling."""
    import copy


    cfgs = run.ledger_dict.get("phase_configs")
    if cfgs is not None:
        out = copy.deepcopy(dict(cfgs))
    else:
        out = {}
        for name in run.ledger_dict.get("phases") or {}:
            m = read_marker(run.url, name, run.storage_options) or {}
            if m.get("config") is not None:
                out[name] = m["config"]
    classes = section_classes()
    for secs in out.values():
        for sec, cfg in (secs or {}).items():
            if cfg is None and sec in classes:
                try:
                    secs[sec] = classes[sec]().model_dump(mode="json")
                except ValueError:  # a required field: nothing to fill in
                    pass
    by_name = {p.name: p for p in phases()}
    stats = run.ledger_dict.get("phases") or {}
    for name, secs in out.items():   # settings a phase chose while running (dedup's banding)
        if name in by_name and secs:
            out[name] = by_name[name].applied_config(secs, stats.get(name) or {})
    return out
