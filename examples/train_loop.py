"""A training loop on a run's token shards with TokenLoader, checkpointed and resumed mid-epoch.

    python examples/train_loop.py runs/sample/tokens/index.json [--steps 6] [--seq-len 128]

Trains a tiny next-token model (an embedding and a linear layer, CPU) for ``--steps`` steps,
saves model + optimizer + loader state halfway, then resumes from that checkpoint in a fresh
loader and checks that the resumed run sees exactly the batches the uninterrupted run saw.
Needs torch (``pip install -e ".[torch]"``).
"""
import argparse
import json

import torch

from datapipe.loader import TokenLoader, TokenShardDataset


def make_loader(index: str, seq_len: int, batch_size: int, num_workers: int) -> TokenLoader:
    ds = TokenShardDataset(index, seq_len=seq_len, rank=0, world_size=1, seed=0, output="torch")
    return TokenLoader(ds, batch_size=batch_size, num_workers=num_workers)


def train(loader, model, opt, steps: int, start: int = 0, checkpoint_at=None):
    """Run until ``steps`` steps; returns (per-step batch sums, checkpoint dict or None)."""
    seen, ckpt = [], None
    for step, batch in enumerate(loader, start=start):
        if step >= steps:
            break
        inputs, targets = batch[:, :-1], batch[:, 1:]
        loss = torch.nn.functional.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.append(int(batch.sum()))
        print(f"step {step} loss {loss.item():.3f}")
        if checkpoint_at is not None and step + 1 == checkpoint_at:
            ckpt = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1,
                    "data": json.loads(json.dumps(loader.state_dict()))}   # what you would save to disk
    return seen, ckpt


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("index")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--num-workers", type=int, default=0)
    a = ap.parse_args(argv)
    with open(a.index) as fh:
        vocab = json.load(fh)["tokenizer"]["vocab_size"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, 16), torch.nn.Linear(16, vocab))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    half = a.steps // 2
    full, ckpt = train(make_loader(a.index, a.seq_len, a.batch_size, a.num_workers), model, opt, a.steps,
                       checkpoint_at=half)
    # Resume: a new loader (as after a restart) continues with the batch that would have come next.
    loader = make_loader(a.index, a.seq_len, a.batch_size, a.num_workers)
    loader.load_state_dict(ckpt["data"])
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    rest, _ = train(loader, model, opt, a.steps, start=ckpt["step"])
    assert rest == full[half:], "resumed batches differ from the uninterrupted run"
    print(f"resumed at step {ckpt['step']}: the same {len(rest)} batches as the uninterrupted run")
    return full, rest


if __name__ == "__main__":
    main()
