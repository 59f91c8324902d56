"""The built-in proxy: a small decoder-only language model built from PyTorch's own layers.

Token + learned position embeddings, ``layers`` pre-norm ``torch.nn.TransformerEncoderLayer``
blocks run with a causal mask (GELU MLP of 4 * d_model), a final LayerNorm and an output head tied
to the token embedding (GPT-2's layout, Radford et al. 2019). Needs the optional ``torch`` extra.
"""
from __future__ import annotations

try:
    import torch
    from torch import nn
except ImportError as e:  # pragma: no cover - the test suite installs the torch extra
    raise ImportError("the built-in proxy trainer needs PyTorch: pip install 'datapipe[torch]' "
                      "(or use trainer.kind: command)") from e


class ProxyLM(nn.Module):
    """Decoder-only LM. ``forward(ids)``: ids int64 [batch, T] (T <= seq_len) -> logits float [batch, T, vocab].

    Args: vocab_size (ids must be < it), seq_len (max context), d_model, heads (divides d_model),
    layers, dropout.
    """

    def __init__(self, vocab_size: int, seq_len: int, d_model: int, heads: int, layers: int, dropout: float = 0.0):
        super().__init__()
        self.seq_len = seq_len
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        block = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        # enable_nested_tensor only applies to post-norm padding masks; off avoids its warning
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok.weight  # tied
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        if t > self.seq_len:
            raise ValueError(f"sequence of {t} tokens exceeds the proxy's seq_len {self.seq_len}")
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=ids.device, dtype=x.dtype)
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.head(self.norm(x))


def num_parameters(model: nn.Module) -> int:
    """Trainable parameters, the tied embedding/head counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
