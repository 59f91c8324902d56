"""A vocabulary too large for the token dtype is refused before any work (explicit uint16) or gets
uint32 (dtype auto), also when the ranks file was replaced in place since the last run."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from distributed import Client, LocalCluster
from phase3_util import cc_docs, make_run_dir

from datapipe.env import shared_data
from datapipe.stages.phases.tokenize.mixture import MixConfig
from datapipe.stages.phases.tokenize.phase import run_mix_tokenize
from datapipe.stages.phases.tokenize.tokenizer import TokenizeConfig

TOK = shared_data() / "tokenizers"


def test_run_refuses_uint16_for_cl100k_before_any_work(tmp_path):
    out = tmp_path / "out"
    m = tmp_path / "m.yaml"
    m.write_text(f"name: t\ninputs: {{paths: [{shared_data() / 'cc_text'}]}}\noutput: {out}\n"
                 "cluster: {workers: 1}\nstages: [{langid: {min_score: 0.5}}]\n"
                 "tokenize: {tokenizer: cl100k_base, dtype: uint16}\n")
    exe = Path(sys.executable).with_name("datapipe")
    p = subprocess.run([str(exe), "run", str(m)], capture_output=True, text=True, timeout=300, check=False,
                       env=dict(os.environ, DATAPIPE_PROGRESS="0"))
    assert p.returncode == 2, p.stderr[-2000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "tokenize.dtype uint16 cannot hold ids up to 100276" in lines[0], p.stderr
    assert not out.exists()  # nothing read, nothing written


def _max_id(run: Path) -> int:
    return max(int(np.max(r)) for f in sorted((run / "tokens").glob("shard-*.parquet"))
               for r in pq.read_table(f).column("input_ids").to_pylist() if r)


def test_ranks_replaced_in_place_choose_the_dtype_of_the_new_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "wide.tiktoken"  # an unknown ranks file: EOS = number of ranks
    docs = cc_docs()
    run, fresh = make_run_dir(tmp_path / "run", docs), make_run_dir(tmp_path / "fresh", docs)
    tok, mix = TokenizeConfig(tokenizer=str(path)), MixConfig()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as cl, \
            Client(cl) as client:
        path.write_bytes((TOK / "r50k_base.tiktoken").read_bytes())  # 50,256 ranks: uint16
        assert run_mix_tokenize(client, str(run), mix, tok)["dtype"] == "uint16"
        path.write_bytes((TOK / "cl100k_base.tiktoken").read_bytes())  # 100,256 ranks: uint32
        second = run_mix_tokenize(client, str(run), mix, tok)
        run_mix_tokenize(client, str(fresh), mix, tok)
    index = json.loads((run / "tokens" / "index.json").read_text())
    assert second["dtype"] == index["dtype"] == "uint32"
    assert index["tokenizer"]["eos_id"] == 100_256 and index["tokenizer"]["vocab_size"] == 100_257
    assert _max_id(run) == 100_256  # the EOS ends every document: ids above 65,535 stored unwrapped
    for shard in sorted((fresh / "tokens").glob("shard-*.parquet")):
        assert (run / "tokens" / shard.name).read_bytes() == shard.read_bytes()
