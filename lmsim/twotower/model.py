"""The two-tower language model (Eq. 1), its output heads (Eq. 2) and its training FLOPs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lmsim.twotower.config import IGNORE_INDEX, TowerConfig


class SharedEmbedding(nn.Module):
    """Word vectors shared by both towers (and by the tied softmax), plus learned positions
    and a LayerNorm for transformer towers."""

    def __init__(self, vocab_size: int, dim: int, seq_len: int, positions: bool, dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, dim)
        self.positions = nn.Embedding(seq_len, dim) if positions else None
        self.norm = nn.LayerNorm(dim) if positions else nn.Identity()
        self.drop = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids)
        if self.positions is not None:
            x = x + self.positions(torch.arange(ids.shape[1], device=ids.device))
        return self.drop(self.norm(x))


class LSTMTower(nn.Module):
    """ELMo-style tower: forward and backward LSTM stacks, shifted by one position.

    The state at ``i`` is the forward state at ``i - 1`` (it has read ``x_1..x_{i-1}``) beside
    the backward state at ``i + 1`` (``x_{i+1}..x_n``); zeros where no context exists.
    """

    def __init__(self, config: TowerConfig):
        super().__init__()
        out = config.lstm_proj or config.hidden

        def stack():
            sizes = [config.embed_dim] + [out] * (config.layers - 1)
            return nn.ModuleList(
                nn.LSTM(n, config.hidden, batch_first=True, proj_size=config.lstm_proj)
                for n in sizes
            )

        self.fwd, self.bwd = stack(), stack()
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        f, b = x, x.flip(1)
        states = []
        for lstm_f, lstm_b in zip(self.fwd, self.bwd):
            f, b = self.drop(lstm_f(f)[0]), self.drop(lstm_b(b)[0])
            shifted_f = F.pad(f[:, :-1], (0, 0, 1, 0))
            shifted_b = F.pad(b.flip(1)[:, 1:], (0, 0, 0, 1))
            states.append(torch.cat([shifted_f, shifted_b], dim=-1))
        return states


class TransformerTower(nn.Module):
    """Pre-LayerNorm transformer stack; causal (GPT, states shifted right by one) or not."""

    def __init__(self, config: TowerConfig, causal: bool):
        super().__init__()
        self.causal = causal
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                config.hidden,
                config.heads,
                config.ffn_dim,
                config.dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            for _ in range(config.layers)
        )
        self.norm = nn.LayerNorm(config.hidden)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        mask = None
        if self.causal:
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
        states, h = [], x
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=self.causal)
            states.append(h)
        states[-1] = self.norm(states[-1])
        if self.causal:  # the state that has read x_1..x_{i-1} predicts position i
            states = [F.pad(s[:, :-1], (0, 0, 1, 0)) for s in states]
        return states


class OutputHead(nn.Module):
    """BERT's prediction head on a state, decoded with the (tied) word-vector table.

    ``logits = LayerNorm(GELU(W h + c)) Eᵀ + b``; ``E`` is passed at call time so the head
    owns no copy of the embedding (phase 2 trains heads while ``E`` stays frozen).
    """

    def __init__(self, in_dim: int, embed_dim: int, vocab_size: int):
        super().__init__()
        self.dense = nn.Linear(in_dim, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, h: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(h))), embedding, self.bias)


class TwoTowerLM(nn.Module):
    """Shared embedding → two identical towers → concatenated states → tied softmax (Eq. 1).

    Parameters
    ----------
    config : TowerConfig
    vocab_size, seq_len : int
    """

    def __init__(self, config: TowerConfig, vocab_size: int, seq_len: int):
        super().__init__()
        self.config = config
        transformer = config.tower != "elmo"
        self.embed = SharedEmbedding(
            vocab_size, config.embed_dim, seq_len, transformer, config.dropout
        )
        self.towers = nn.ModuleList(_new_tower(config) for _ in range(2))
        self.head = OutputHead(2 * config.state_dim, config.embed_dim, vocab_size)
        self.apply(_init_weights)

    @property
    def embedding(self) -> torch.Tensor:
        """The word-vector table ``E`` of shape (vocab, embed), tied to every output head."""
        return self.embed.tokens.weight

    def states(self, ids: torch.Tensor, all_layers: bool = False) -> list:
        """Each tower's states aligned with the positions they predict.

        Returns
        -------
        list of 2 Tensors of shape (batch, seq_len, state_dim)
            (``all_layers``: 2 lists of one such tensor per layer, the last one last.)
        """
        x = self.embed(ids)
        out = [tower(x) for tower in self.towers]
        return out if all_layers else [layers[-1] for layers in out]

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Logits of shape (n_predicted, vocab) at the positions where ``labels != -100``."""
        sel = labels != IGNORE_INDEX
        h1, h2 = self.states(ids)
        return self.head(torch.cat([h1[sel], h2[sel]], dim=-1), self.embedding)


def _new_tower(config: TowerConfig) -> nn.Module:
    if config.tower == "elmo":
        return LSTMTower(config)
    return TransformerTower(config, causal=config.tower == "gpt")


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)


def new_heads(config: TowerConfig, vocab_size: int, seed: int) -> nn.ModuleList:
    """Phase 2's two fresh heads, one per tower (seeded apart from phase 1)."""
    torch.manual_seed(seed + 10_000)
    heads = nn.ModuleList(
        OutputHead(config.state_dim, config.embed_dim, vocab_size) for _ in range(2)
    )
    heads.apply(_init_weights)
    return heads


def two_tower_flops_per_token(
    config: TowerConfig, seq_len: int, vocab_size: int | None = None
) -> float:
    """Training FLOPs per input token of both towers and, with ``vocab_size``, the head.

    Every weight matrix costs 6 FLOPs per parameter per token (forward 2, backward 4;
    Chowdhery et al. 2022, App. B):

    * a transformer tower: ``L (4 d² + 2 d f)`` matrix weights (``f`` = ``ffn_dim``) plus
      attention ``12 L T d``;
    * an ELMo tower: per direction and layer ``4 h (n_in + out)`` LSTM weights (+ ``h · out``
      for the projection);
    * the output head of Eq. 1 (``vocab_size`` given): the dense map ``2 s → e`` and the
      tied decoder ``e → V`` at the predicted positions only: 15 % of them for the BERT
      tower (its masking rate), all of them for the ELMo and GPT towers.

    Embedding look-ups, norms and biases are left out. Without ``vocab_size`` the head is
    left out and MFU is a lower bound.
    """
    if config.tower == "elmo":
        out = config.lstm_proj or config.hidden
        per_dir = 0
        for layer in range(config.layers):
            n_in = config.embed_dim if layer == 0 else out
            per_dir += 4 * config.hidden * (n_in + out) + (
                config.hidden * out if config.lstm_proj else 0
            )
        towers = 2 * 2 * 6.0 * per_dir
    else:
        d, n_layers = config.hidden, config.layers
        weights = n_layers * (4 * d * d + 2 * d * config.ffn_dim)
        towers = 2 * (6.0 * weights + 12.0 * n_layers * seq_len * d)
    if vocab_size is None:
        return towers
    predicted = 0.15 if config.tower == "bert" else 1.0
    head = 2 * config.state_dim * config.embed_dim + config.embed_dim * vocab_size
    return towers + 6.0 * predicted * head
