""""Did you mean" for names a user types: stages, settings, reasons (``difflib``'s ratio, cutoff 0.6).

``pydantic_lines`` turns a pydantic ``ValidationError`` into ``(location, message)`` pairs in the
project's words: an unknown key (pydantic's ``extra_forbidden``) becomes ``unknown setting 'x'``
with the closest known setting of that model and the list of known ones, never pydantic's own
"Extra inputs are not permitted".
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable


def close(word: str, candidates: Iterable[str], n: int = 1) -> list[str]:
    """Up to ``n`` of ``candidates`` closest to ``word`` (ratio >= 0.6), best first. A candidate
    whose part after ``stage:`` equals ``word`` comes first (``min_sentences`` ->
    ``c4:min_sentences``)."""
    cands = sorted(set(candidates))
    exact_tail = [c for c in cands if ":" in c and c.split(":", 1)[1] == word]
    fuzzy = difflib.get_close_matches(word, cands, n=n, cutoff=0.6)
    tails = {c.split(":", 1)[1]: c for c in cands if ":" in c}
    fuzzy += [tails[t] for t in difflib.get_close_matches(word, list(tails), n=n, cutoff=0.6)]
    return list(dict.fromkeys(exact_tail + fuzzy))[:n]


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or ``""`` when none is close."""
    best = close(str(word), candidates)
    return f"; did you mean {best[0]!r}?" if best else ""


def _model_at(model, loc: tuple):
    """The pydantic model class that holds the last key of ``loc`` (walking nested model fields)."""
    from pydantic import BaseModel

    cur = model
    for key in loc[:-1]:
        fields = getattr(cur, "model_fields", None)
        if not fields or key not in fields:
            return None
        ann = fields[key].annotation
        subs = [a for a in (ann, *getattr(ann, "__args__", ())) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not subs:
            return None
        cur = subs[0]
    return cur


def known_settings(model) -> list[str]:
    return [k for k in getattr(model, "model_fields", {}) if k != "source_file"]


def pydantic_lines(error, model=None, also: Iterable[str] = (), list_known: bool = True) -> list[tuple[tuple, str]]:
    """``[(loc, message)]`` for each error of ``error`` (a pydantic ValidationError) against
    ``model`` (its class, to name the known settings of an unknown key). ``also``: more names
    valid at the top level (phase sections); ``list_known``: append the known settings."""
    out = []
    for err in error.errors():
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            owner = _model_at(model, loc) if model is not None else None
            known = known_settings(owner) if owner is not None else []
            if len(loc) == 1:
                known += list(also)
            msg = f"unknown setting {loc[-1]!r}" + did_you_mean(str(loc[-1]), known)
            if known and list_known:
                msg += f" (settings: {', '.join(known)})"
        else:
            msg = err["msg"]
        out.append((loc, msg))
    return out


def config_error(what: str, error, model) -> str:
    """One line: ``what.setting: message; ...`` for a config that failed validation."""
    return "; ".join(f"{'.'.join([what, *map(str, loc)])}: {msg}" for loc, msg in pydantic_lines(error, model))
