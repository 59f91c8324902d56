"""``datapipe ablate MANIFEST``: the command line of the mixture ablation."""
from __future__ import annotations

import json
import sys

from datapipe.ablate.data import RunNotReady
from datapipe.ablate.manifest import load_ablation_manifest
from datapipe.ablate.runner import run_ablation
from datapipe.cli.commands import COMMANDS
from datapipe.manifest.load import ManifestError


def add_cli(sub) -> None:
    p = sub.add_parser(
        "ablate", help=COMMANDS["ablate"].help,
        description="Materialize one training set per candidate mixture from a finished run's token shards "
                    "(no re-tokenization), train a proxy LM on each (or run --trainer-cmd), score held-out "
                    "sets, and write a ranked table, a plot and a recommended mix: block. Finished mixtures "
                    "are skipped on rerun. Every option below replaces the manifest's setting; left out, the "
                    "manifest's value (or its default, named in each option) applies.")
    p.add_argument("manifest", help="ablation manifest (e.g. manifests/ablation.yaml)")
    p.add_argument("--run", help="finished run directory (the manifest's run:, required there)")
    p.add_argument("--output", help="ablation output directory (the manifest's output:, default RUN/ablation/NAME)")
    p.add_argument("--budget-tokens", type=int,
                   help="training tokens per proxy run (the manifest's budget_tokens:, required there)")
    p.add_argument("--device", help="auto, cpu, cuda or cuda:N, built-in trainer (the manifest's device:, default auto)")
    p.add_argument("--threads", type=int, help="torch CPU threads per proxy run (the manifest's threads:, default 1)")
    p.add_argument("--trainer-cmd", metavar="TEMPLATE",
                   help="external trainer, e.g. 'python train.py {train_index} {eval_dir} {out}'; it must "
                        "write {out}/metrics.json with {\"eval\": {set: loss}} (default: the built-in proxy)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run proxies on this Dask scheduler (the manifest's cluster.scheduler:, default none)")
    p.add_argument("--workers", type=int,
                   help="local Dask workers, 1 = in-process without Dask (the manifest's cluster.workers:, default 1)")
    p.add_argument("--gpu-resources", action="store_true",
                   help="each proxy task needs the worker resource GPU=1 (the manifest's cluster.gpu_resources:)")
    p.add_argument("--seeds", type=int, nargs="+", metavar="S",
                   help="proxy training seeds, each mixture trained once per seed; two or more measure the noise "
                        "floor (the manifest's seeds:, default 0 1)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars on stderr, one line per finished proxy run instead")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of the ranking")
    p.set_defaults(func=cmd_ablate)


def _overrides(args) -> dict:
    o = {}
    for flag, key in (("run", "run"), ("output", "output"), ("budget_tokens", "budget_tokens"),
                      ("device", "device"), ("threads", "threads"), ("scheduler", "cluster.scheduler"),
                      ("workers", "cluster.workers"), ("seeds", "seeds")):
        if getattr(args, flag) is not None:
            o[key] = getattr(args, flag)
    if args.trainer_cmd:
        o["trainer.kind"], o["trainer.command"] = "command", args.trainer_cmd
    if args.gpu_resources:
        o["cluster.gpu_resources"] = True
    return o


def cmd_ablate(args) -> int:

    try:
        m = load_ablation_manifest(args.manifest, _overrides(args))

        res = run_ablation(m, log=lambda s: print(s, file=sys.stderr, flush=True), progress=not args.no_progress)
    except (ManifestError, RunNotReady, ValueError, ImportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    a = res["analysis"]
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "mixtures"} | {"mixtures": len(res["mixtures"])},
                         indent=2, default=str))
    else:
        print(f"{len(res['mixtures'])} distinct mixtures ranked ({len(res['duplicates'])} with duplicates merged); "
              f"proxy runs: {res['trained']} trained, {res['skipped']} resumed; {len(res['failed'])} mixtures "
              f"failed -> {res['output']} ({res['seconds']:.0f} s)")
        if a:
            print(a["ranking_md"])
            print(a["mix_block"])
    for f in res["failed"]:
        print(f"FAILED {f['mixture_id']}: {f['error']}", file=sys.stderr)
    return 1 if res["failed"] else 0
