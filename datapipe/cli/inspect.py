"""``datapipe inspect RUN_DIR`` and ``datapipe report RUN_DIR``: look at what a run did."""
from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from datapipe.cli.commands import COMMANDS
from datapipe.cli.termfmt import cannot_write, config_lines, os_error_line, print_funnel, short_value
from datapipe.inspect import reader as I
from datapipe.inspect.ids import SHORT, resolve_id, short_id
from datapipe.inspect.run_config import (
    effective_phase_configs,
    effective_stage_configs,
)
from datapipe.inspect.what_if import what_if
from datapipe.stages.phases.report.html import write_report

EPILOG = """examples:
  datapipe inspect runs/sample                                   the funnel
  datapipe inspect runs/sample --reason langid:low_score --sample 5 --seed 1
  datapipe inspect runs/sample --kept --where "lang_score < 0.8 and lang = 'de'"
  datapipe inspect runs/sample --rejected --where "reject_stage = 'langid'" --columns id,url,lang_score
  datapipe inspect runs/sample --doc 00010d21e48549b2c7766f8c76a574b4 --raw
  datapipe inspect runs/sample --what-if langid.min_score=0.9
  datapipe inspect runs/sample --json | jq .stages

--where takes a DuckDB SQL boolean expression over the shard columns (strings in single quotes).
--what-if recomputes the stages that declare their decision rules on stored signals (langid,
gopher_*, c4, fineweb, decontam, the safety classifiers...); `datapipe stages NAME` shows a stage's
rules. extract and url_blocklist decide from the page itself and are not recomputable."""


def add_cli(sub) -> None:
    """Register the ``inspect`` and ``report`` subcommands."""
    p = sub.add_parser("inspect", help=COMMANDS["inspect"].help,
                       description="Inspect a finished run (the --output directory of `datapipe run`). "
                                   "Without options: the funnel. Reads only the columns each question needs.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="output directory (or URL) of a run")
    q = p.add_mutually_exclusive_group()
    q.add_argument("--reason", metavar="REASON", help="sample documents rejected/errored with REASON")
    q.add_argument("--kept", action="store_true", help="query kept documents (with --where)")
    q.add_argument("--rejected", action="store_true", help="query rejected documents (with --where)")
    q.add_argument("--errors", action="store_true", help="query errored records (with --where)")
    q.add_argument("--doc", metavar="ID", help="one document in full: provenance, signals, fate, cluster "
                                               "(ID or an unambiguous prefix of it, e.g. the 12 characters tables show)")
    q.add_argument("--what-if", action="append", metavar="STAGE.PARAM=VALUE",
                   help="recompute a stage's decisions with a changed config value (repeatable, one stage)")
    p.add_argument("--where", metavar="EXPR",
                   help="DuckDB SQL filter over the documents of --kept, --rejected or --errors (one of them is "
                        "required: alone, --where is an error), e.g. \"quality_score < 0.3\"; default: every row")
    p.add_argument("--columns", metavar="A,B", help="columns to show (with --kept, --rejected or --errors)")
    p.add_argument("--limit", type=_count, default=20, help="rows to show with --where (the count is always exact)")
    p.add_argument("--sample", type=_count, default=5, metavar="N", help="documents to draw with --reason")
    p.add_argument("--seed", type=int, default=0, help="random seed for --reason (same seed, same documents)")
    p.add_argument("--text", action="store_true", help="include text (with --kept, --rejected or --errors)")
    p.add_argument("--raw", action="store_true", help="with --doc: print the original HTML from the WARC file")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=cmd_inspect)

    r = sub.add_parser("report", help=COMMANDS["report"].help,
                       description="Write RUN_DIR/report.html: funnel, rejections by reason, languages, one "
                                   "histogram per signal column with its thresholds, per-stage time. Every run writes "
                                   "the same page without the histograms (they cost ~0.1-0.3 s each; "
                                   "report: {histograms: true} in the manifest draws them in the run); this command "
                                   "draws them.")
    r.add_argument("run_dir", metavar="RUN_DIR", help="output directory of a run")
    r.add_argument("--out", metavar="FILE", help="where to write (default RUN_DIR/report.html)")
    r.add_argument("--log-y", choices=["auto", "always", "never"], default="auto",
                   help="histograms' y axis: log when kept and rejected counts differ 20x (auto, the default), "
                        "always (a threshold's tail stays visible) or never")
    r.set_defaults(func=cmd_report)


def _count(text: str) -> int:
    """An argparse type: a whole number >= 0 (a negative --limit reached DuckDB as a bad --where)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: a whole number >= 0") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"invalid count {n}: a whole number >= 0")
    return n


def cmd_report(args) -> int:

    err = Console(stderr=True, soft_wrap=True)
    try:
        path = write_report(args.run_dir, out=args.out, log_y=args.log_y)
    except (I.NotARunError, I.InspectError) as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        return 2
    except OSError as e:  # --out in a folder that does not exist, or not writable
        return cannot_write(err, "the report", e)
    Console().print(f"report: {path}")
    return 0


def cmd_inspect(args) -> int:
    out, err = Console(), Console(stderr=True, soft_wrap=True)
    asked = [f for f, v in (("--where", args.where is not None), ("--columns", args.columns), ("--text", args.text))
             if v]
    if asked and not (args.kept or args.rejected or args.errors):
        # Without a kind these were ignored and the funnel printed: say so instead.
        err.print(f"[bold red]error:[/] {', '.join(asked)} needs --kept, --rejected or --errors", highlight=False)
        return 2
    try:
        run = I.Run.open(args.run_dir)
        if args.reason:
            res = I.sample_reason(run, args.reason, args.sample, args.seed)
            show = _show_samples
        elif args.kept or args.rejected or args.errors:
            kind = "kept" if args.kept else "rejected" if args.rejected else "errors"
            cols = args.columns.split(",") if args.columns else None
            res = I.where(run, kind, args.where if args.where is not None else "true", args.limit, cols, args.text)
            show = _show_where
        elif args.doc:

            res = I.document(run, resolve_id(run, args.doc))
            if args.raw:
                res["raw"], res["raw_error"] = _raw(res)
            show = _show_doc
        elif args.what_if:

            res = what_if(run, args.what_if)
            show = _show_what_if
        else:

            res = I.funnel(run)
            res["stage_configs"] = [{n: c} for n, c in effective_stage_configs(run)]
            res["phase_configs"] = effective_phase_configs(run)
            res["limit"] = run.ledger_dict.get("limit")
            show = _show_funnel
    except (I.NotARunError, I.InspectError) as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        return 2
    if args.json:
        sys.stdout.write(json.dumps(res, indent=2, default=str) + "\n")
    else:
        show(out, res)
    return 0


def _table(title, cols, right=()):
    t = Table(title=title, title_justify="left")
    for c in cols:
        t.add_column(c, justify="right" if c in right else "left", overflow="fold",
                     no_wrap=c in ("reason", "stage", "id", "duplicate_of", "reject_reason", "reject_stage"))
    return t


def _show_funnel(out: Console, f: dict) -> None:

    out.print(f"[bold]{f['run']}[/]  records by type: "
              + ", ".join(f"{k} {v:,}" for k, v in sorted(f["records_by_type"].items())), highlight=False)
    print_funnel(out, f["stages"], extra=("share", "bytes"))  # fits the width; numbers never cut
    tot = f["totals"]
    out.print(f"kept {tot['kept']:,} of {tot['in']:,} records; rejected {tot['rejected']:,}, errored {tot['errored']:,}",
              highlight=False)
    lim = f.get("limit")
    if lim:
        out.print(f"limited run: at most {lim['records_per_file']:,} records per input file "
                  f"({lim['inputs_cut']} input(s) cut short)", highlight=False)
    for key, title in (("languages", "Languages (kept)"), ("hosts", "Domains (kept, top)")):
        if f[key]:
            col = "lang" if key == "languages" else "host"
            t = _table(title, [col, "docs", "share"], right=("docs", "share"))
            for r in f[key]:
                # documents without a URL (text inputs) have no host; no language: langid not run
                t.add_row("(none)" if r[col] is None else str(r[col]), f"{r['docs']:,}", f"{r['share']:.1%}")
            out.print(t)
    if f.get("tokens"):
        tk = f["tokens"]
        t = _table(f"Tokens per domain ({tk['total_tokens']:,} total)", ["domain", "tokens", "target"],
                   right=("tokens", "target"))
        for d, n in tk["tokens_per_domain"].items():
            tgt = tk["target_tokens"].get(d)
            t.add_row(d, f"{n:,}", "–" if tgt is None else f"{tgt:,.0f}")
        out.print(t)
    cfgs = [next(iter(c.items())) for c in f.get("stage_configs") or []]
    sections = [(sec, cfg) for secs in (f.get("phase_configs") or {}).values()
                for sec, cfg in (secs or {}).items() if cfg is not None]
    if cfgs or sections:
        out.print("[bold]Settings in force[/] (every stage and phase section, defaults filled in):")
        for line in config_lines(cfgs + sections, out.width):
            out.print(line, highlight=False, markup=False, soft_wrap=True)


def _show_samples(out: Console, res: dict) -> None:
    out.print(f"[bold]{res['reason']}[/]: {res['total']:,} documents; {len(res['samples'])} drawn with seed {res['seed']}")
    for s in res["samples"]:
        ex = s["explain"]
        sig = ", ".join(f"{k}={_fmt(v)}" for k, v in ex.get("signals", {}).items())
        thr = ", ".join(f"{k}={_fmt(v)}" for k, v in ex.get("thresholds", {}).items())
        out.rule(f"{s['id']}", align="left")
        out.print(f"url: {s['url']}\nstage: {s['stage']}  signals: {sig or '–'}  thresholds: {thr or '–'}", highlight=False)
        out.print("\n".join(f"  │ {line[:160]}" for line in s["text_head"])
                  + (f"\n  │ … ({s['text_lines']} lines)" if s["text_lines"] > len(s["text_head"]) else ""),
                  highlight=False, markup=False)


def _fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _show_where(out: Console, res: dict) -> None:

    narrow = out.width < 120  # a whole 32-hex id would wrap over two lines beside url and reason
    t = _table(f"{res['kind']} where {res['where']}: {res['count']:,} documents "
               f"(showing {len(res['rows'])})", res["columns"])
    for r in res["rows"]:
        t.add_row(*[(short_id(r[c]) if c in ("id", "duplicate_of") and narrow else _fmt(r[c])[:300])
                    if r.get(c) is not None else "–" for c in res["columns"]])
    out.print(t)
    if narrow and any(len(str(r.get("id") or "")) > SHORT + 2 for r in res["rows"]):
        out.print(f"ids cut to their first {SHORT} characters; --doc takes such a prefix", highlight=False)


def _show_doc(out: Console, d: dict) -> None:
    fate = d["fate"]
    out.print(f"[bold]{d['id']}[/]  fate: [bold]{fate['fate']}[/]"
              + (f" at {fate['stage']} ({fate['reason']})" if fate.get("stage") else ""), highlight=False)
    for title, data in (("Provenance", d["provenance"]), ("Signals", d["signals"]),
                        ("Decision", fate.get("explain", {}).get("thresholds") or {})):
        if data:
            t = _table(title, ["field", "value"])
            for k, v in data.items():
                t.add_row(k, "–" if v is None else _fmt(v))
            out.print(t)
    occ = d.get("occurrences") or []
    if len(occ) > 1:  # one id, several rows (the same WARC-Record-ID in two inputs): each one's fate
        t = _table(f"This id occurs {len(occ)} times", ["fate", "stage", "reason", "source", "offset"], right=("offset",))
        for o in occ:
            t.add_row(o["fate"], o["stage"] or "–", o["reason"] or "–", str(o["source"]), _fmt(o["offset"]))
        out.print(t)
    if d["cluster"]:
        c = d["cluster"]
        out.print(f"near-duplicate cluster: {c['size']} documents, representative {c['representative']}: "
                  + ", ".join(c["members"][:20]))
    loc = d["raw_location"]
    out.print(f"raw record: {loc['file']} at byte {loc['offset']}")
    out.rule("extracted text", align="left")
    out.print(d["text"] or "", markup=False, highlight=False)
    if d.get("raw"):
        out.rule(f"original HTML ({d['raw']['warc_record_id']})", align="left")
        out.print(d["raw"]["html"], markup=False, highlight=False)
    elif d.get("raw_error"):
        out.print(f"original HTML: {d['raw_error']}", markup=False, highlight=False)


def _raw(res: dict) -> tuple[dict | None, str | None]:
    """``(raw_html result, None)``, or ``(None, why not)``: a text input (JSONL, Parquet) has no HTML,
    and an input moved or deleted since the run cannot be read (was a FileNotFoundError traceback)."""
    loc = res["raw_location"]
    if res["provenance"].get("record_type") == "text":
        return None, f"none: {loc['file']} is a text input (the text above is the document as read)"
    try:
        return I.raw_html(loc["file"], loc["offset"]), None
    except OSError as e:
        return None, "cannot read the input: " + os_error_line(e)


def _show_what_if(out: Console, w: dict) -> None:
    from rich.markup import escape


    out.print(f"[bold]what if[/] {w['stage']}: " + escape(", ".join(
        f"{k} {short_value(w['config_old'].get(k))} -> {short_value(v)}" for k, v in w["changes"].items())),
        highlight=False)
    out.print(f"{w['rows_reached_stage']:,} stored documents reached {w['stage']}; the run's own config "
              f"reproduces {w['reproduced']:,} of their decisions")
    t = _table(f"{w['stage']} rejections", ["reason", "now", "what if", "change"], right=("now", "what if", "change"))
    for r in sorted(set(w["rejected_old"]) | set(w["rejected_new"])):
        a, b = w["rejected_old"].get(r, 0), w["rejected_new"].get(r, 0)
        t.add_row(r, f"{a:,}", f"{b:,}", f"{b - a:+,}")
    out.print(t)
    m = w["moved"]
    out.print(f"kept {w['kept_old']:,} -> {w['kept_new_min']:,}"
              + (f" .. {w['kept_new_max']:,}" if w["kept_new_max"] != w["kept_new_min"] else "")
              + f"  (kept->rejected {m['kept_to_rejected']:,}; later-stage rejections now rejected here "
              f"{m['later_rejection_to_this_stage']:,}; would pass this stage {m['would_pass']:,}, "
              f"not evaluated by later stages; reason changed {m['reason_changed']:,})")
