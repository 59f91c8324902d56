"""One proxy run: train on a materialized training set, score every eval set, return metrics.

``train_builtin`` uses the PyTorch proxy (``datapipe.ablate.model``); ``train_command`` runs a
user's command template and reads the metrics JSON it writes. Both return the same dict:
``{"eval": {name: {"loss", "ppl", "tokens"}}, "steps", "tokens_trained", "params", "device",
"train_loss", "wall_s"}``; losses are mean cross-entropy in nats per predicted token.
"""
from __future__ import annotations

import json
import math
import shlex
import subprocess
import time
from pathlib import Path

from datapipe.ablate.data import read_flat_tokens
from datapipe.ablate.model import ProxyLM, num_parameters
from datapipe.loader import TokenShardDataset


class TrainerError(RuntimeError):
    """A proxy run failed (bad device, external command failed or wrote no usable metrics)."""


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when PyTorch sees a GPU, else ``cpu``. Raises TrainerError for an
    unavailable CUDA device."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TrainerError(f"--device {device}: PyTorch sees no CUDA device (torch {torch.__version__})")
    return device


def _lr_lambda(steps: int, warmup: int):
    def f(step: int) -> float:  # linear warm-up, cosine decay to 10% (the usual LM schedule)
        if step < warmup:
            return (step + 1) / warmup
        p = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p)))
    return f


def evaluate(model, eval_dir: Path, names: list[str], seq_len: int, batch_size: int, limit: int, device: str,
             vmap=None) -> dict:
    """Mean next-token loss on each eval set ``eval_dir/<name>/index.json``.

    The set's ids (at most ``limit + 1``) are cut into non-overlapping windows of ``seq_len + 1``
    (the last one shorter), so every token but the first is predicted once, with its window as
    context. ``vmap``: optional int64 id lookup tensor (``proxy.vocab_size``). Returns ``{name: {"loss", "ppl", "tokens"}}``.
    """
    import torch
    import torch.nn.functional as F

    out = {}
    model.eval()
    with torch.no_grad():
        for name in names:
            flat = torch.from_numpy(read_flat_tokens(eval_dir / name / "index.json", limit + 1))
            if vmap is not None:
                flat = vmap[flat]
            total, count = 0.0, 0
            windows = [flat[i:i + seq_len + 1] for i in range(0, max(len(flat) - 1, 0), seq_len)]
            windows = [w for w in windows if len(w) >= 2]
            full = [w for w in windows if len(w) == seq_len + 1]
            batches = [torch.stack(full[i:i + batch_size]) for i in range(0, len(full), batch_size)]
            batches += [w[None] for w in windows if len(w) < seq_len + 1]
            for b in batches:
                b = b.to(device)
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
                    logits = model(b[:, :-1])
                total += float(F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), b[:, 1:].reshape(-1),
                                               reduction="sum"))
                count += b[:, 1:].numel()
            loss = total / count if count else float("nan")
            out[name] = {"loss": loss, "ppl": math.exp(loss) if count else float("nan"), "tokens": count}
    model.train()
    return out


def train_builtin(train_index: Path, eval_dir: Path, eval_names: list[str], proxy, budget_tokens: int,
                  seed: int, device: str = "auto", threads: int = 1, vocab_map: str | None = None,
                  progress=None) -> dict:
    """Train a fresh ``ProxyLM`` for ``ceil(budget_tokens / (batch_size * seq_len))`` steps of
    AdamW (betas 0.9/0.95, warm-up + cosine) over ``train_index`` (epochs repeat if it is
    shorter), bf16 autocast on CUDA, then ``evaluate``. ``proxy``: the manifest's Proxy section;
    ``vocab_map``: path of an int64 ``.npy`` id lookup (``data.vocab_map``) when it sets vocab_size;
    ``progress``: optional ``f(step, steps, loss)`` called after each optimizer step (``loss`` a
    float only every 25 steps and at the end, else None: reading it syncs the GPU).
    Raises TrainerError when training diverges or a held-out loss is not finite (names the set)."""
    import torch
    import torch.nn.functional as F

    t0, c0 = time.time(), time.process_time()
    device = resolve_device(device)
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    index = json.loads(Path(train_index).read_text())
    vocab = int(index["tokenizer"]["vocab_size"])
    vmap = None
    if vocab_map:
        import numpy as np

        vmap = torch.from_numpy(np.load(vocab_map))
        vocab = int(vmap.max()) + 1
    model = ProxyLM(vocab, proxy.seq_len, proxy.d_model, proxy.heads, proxy.layers, proxy.dropout).to(device)
    steps = max(1, math.ceil(budget_tokens / (proxy.batch_size * proxy.seq_len)))
    cuda = device.startswith("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=proxy.lr, betas=(0.9, 0.95), weight_decay=proxy.weight_decay,
                            fused=cuda)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(steps, max(1, int(proxy.warmup_frac * steps))))
    ds = TokenShardDataset(str(train_index), proxy.seq_len, seed=seed, output="torch")
    if ds.num_sequences() < 1:
        raise TrainerError(f"{train_index}: fewer than seq_len+1={proxy.seq_len + 1} tokens to train on")
    loader = torch.utils.data.DataLoader(ds, batch_size=proxy.batch_size, num_workers=0, pin_memory=cuda)
    step, tail, losses = 0, max(1, steps // 10), []
    while step < steps:
        for batch in loader:
            batch = (vmap[batch] if vmap is not None else batch).to(device, non_blocking=True)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=cuda):
                logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, vocab), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            if step >= steps - tail:
                losses.append(loss.detach())
            step += 1
            if progress is not None:
                progress(step, steps, float(loss.detach()) if step % 25 == 0 or step == steps else None)
            if step >= steps:
                break
    train_loss = float(torch.stack(losses).mean()) if losses else float("nan")
    if not math.isfinite(train_loss):
        raise TrainerError(f"proxy training diverged (loss {train_loss}); lower proxy.lr")
    t_train = time.time() - t0
    ev = evaluate(model, Path(eval_dir), eval_names, proxy.seq_len, proxy.batch_size, proxy.eval_tokens, device, vmap)
    for name, v in ev.items():
        if not math.isfinite(v["loss"]):
            raise TrainerError(f"held-out set {name!r}: loss {v['loss']} over {v['tokens']} tokens is not finite")
    if cuda:
        torch.cuda.synchronize()
    return {"eval": ev, "steps": steps, "tokens_trained": steps * proxy.batch_size * proxy.seq_len,
            "params": num_parameters(model), "device": device, "train_loss": train_loss,
            "train_s": round(t_train, 3), "wall_s": round(time.time() - t0, 3),
            "cpu_s": round(time.process_time() - c0, 3)}  # this process's CPU time, all its threads


def train_command(template: str, fields: dict, out_dir: Path, eval_names: list[str], timeout_s: float | None) -> dict:
    """Run ``template`` with ``{train_index} {eval_dir} {out} {budget_tokens} {seq_len} {seed}
    {device} {mixture_id}`` filled in (shell-quoted), then read ``out/metrics.json``:
    ``{"eval": {name: loss | {"loss": x}}, "steps"?: int, "tokens_trained"?: int, ...}``.

    Raises TrainerError for an unknown placeholder, a non-zero exit (log tail included), a
    timeout, or metrics without a finite loss for every eval set.
    """
    t0 = time.time()
    try:
        cmd = template.format(**{k: shlex.quote(str(v)) for k, v in fields.items()})
    except KeyError as e:
        raise TrainerError(f"trainer command has unknown placeholder {e}; known: {sorted(fields)}") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "trainer.log"
    try:
        with open(log, "wb") as fh:
            rc = subprocess.run(shlex.split(cmd), stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
    except subprocess.TimeoutExpired:
        raise TrainerError(f"trainer command timed out after {timeout_s} s: {cmd}") from None
    except FileNotFoundError as e:
        raise TrainerError(f"trainer command not found: {e.filename} ({cmd})") from None
    if rc != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise TrainerError(f"trainer command exited {rc}: {cmd}\n{tail}")
    mpath = out_dir / "metrics.json"
    try:
        m = json.loads(mpath.read_text())
    except (OSError, ValueError) as e:
        raise TrainerError(f"trainer command wrote no readable {mpath}: {e}") from None
    ev = {}
    for name in eval_names:
        v = (m.get("eval") or {}).get(name)
        loss = v.get("loss") if isinstance(v, dict) else v
        if not isinstance(loss, (int, float)) or not math.isfinite(loss):
            raise TrainerError(f"{mpath}: eval.{name} needs a finite loss (got {v!r})")
        ev[name] = {"loss": float(loss), "ppl": math.exp(loss),
                    "tokens": (v.get("tokens") if isinstance(v, dict) else None)}
    return {**{k: v for k, v in m.items() if k != "eval"}, "eval": ev, "device": m.get("device", "external"),
            "wall_s": round(time.time() - t0, 3)}
