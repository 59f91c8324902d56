"""``TextTokenizer.encode_docs`` (one-thread path, one-pass id array) equals tiktoken's own batch
encoding with EOS (and BOS) added by hand."""
import numpy as np

from datapipe.stages.phases.tokenize.tokenizer import TokenizeConfig, load_tokenizer

TEXTS = ["Hello world.", "", "<|endoftext|> is plain text here", "naïve café — 日本語 😀", "a" * 3000, "\ud800 lone"]


def test_encode_docs_matches_tiktoken_batch():
    enc = load_tokenizer(TokenizeConfig())._impl  # the tiktoken Encoding itself (local r50k_base file)
    want = enc.encode_ordinary_batch(TEXTS, num_threads=1)
    eos = enc.eot_token
    assert want[0] == [15496, 995, 13] and want[1] == []  # "Hello", " world", "."
    for bos in (None, "<|endoftext|>"):
        tok = load_tokenizer(TokenizeConfig(**({"bos": bos} if bos else {})))
        ids, lengths = tok.encode_docs(TEXTS)
        pre = [eos] if bos else []
        flat = [x for w in want for x in pre + w + [eos]]
        assert ids.dtype == np.uint16 and ids.tolist() == flat
        assert lengths.tolist() == [len(w) + 1 + len(pre) for w in want]
    tok2 = load_tokenizer(TokenizeConfig(num_threads=2))  # the thread-pool path gives the same ids
    assert tok2.encode_ordinary(TEXTS) == want
