"""Load a run's outputs with Hugging Face ``datasets``: kept documents and token shards.

    python examples/hf_datasets.py runs/sample

The kept documents (``documents/*.parquet``) and the token shards (``tokens/shard-*.parquet``:
``doc_id``, ``domain``, ``copy``, ``num_tokens``, ``input_ids``) are plain Parquet, so
``datasets.load_dataset("parquet", ...)`` reads them. Needs ``pip install -e ".[hf]"``.
"""
import argparse
import glob
import os

import datasets


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    a = ap.parse_args(argv)
    files = lambda sub, pat: sorted(glob.glob(os.path.join(a.run, sub, pat)))
    kept = datasets.load_dataset("parquet", data_files=files("documents", "*.parquet"), split="train")
    print(f"kept documents: {kept.num_rows} rows; columns include {kept.column_names[:6]}")
    tokens = datasets.load_dataset("parquet", data_files=files("tokens", "shard-*.parquet"), split="train")
    total = sum(int(n) for n in tokens["num_tokens"])
    print(f"token shards: {tokens.num_rows} documents, {total} tokens; first ids {tokens[0]['input_ids'][:8]}")
    return kept, tokens


if __name__ == "__main__":
    main()
