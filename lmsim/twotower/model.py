"""The two-tower language model (Eq. 1), its output heads (Eq. 2) and its training FLOPs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lmsim.twotower.config import IGNORE_INDEX, TowerConfig


class SharedEmbedding(nn.Module):
    """Word vectors shared by both towers (and by the tied softmax), plus learned positions
    (transformer towers) and a LayerNorm (transformer towers; ELMo with ``input_proj``)."""

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        seq_len: int,
        positions: bool,
        dropout: float,
        norm: bool | None = None,
    ):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, dim)
        self.positions = nn.Embedding(seq_len, dim) if positions else None
        self.norm = nn.LayerNorm(dim) if (positions if norm is None else norm) else nn.Identity()
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

    With ``config.input_proj`` both directions read ``Linear(embed → embed // 2)`` of the word
    vectors and the last layer's outputs are mapped back to ``embed // 2`` per direction
    (the authors' ``emb1`` and ``h2o_f1`` / ``h2o_b1``). With ``config.elmo_forward_only``
    there is no backward stack and the backward half of every state is zeros (the authors'
    ``flip_seq`` as it runs for even windows).
    """

    def __init__(self, config: TowerConfig):
        super().__init__()
        out = config.lstm_out

        def stack():
            sizes = [config.width] + [out] * (config.layers - 1)
            return nn.ModuleList(
                nn.LSTM(n, config.hidden, batch_first=True, proj_size=config.lstm_proj)
                for n in sizes
            )

        self.proj = nn.Linear(config.embed_dim, config.width) if config.input_proj else None
        self.fwd = stack()
        self.bwd = None if config.elmo_forward_only else stack()
        self.h2o_f = nn.Linear(out, config.width) if config.input_proj else None
        self.h2o_b = (
            nn.Linear(out, config.width)
            if config.input_proj and not config.elmo_forward_only
            else None
        )
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        if self.proj is not None:
            x = self.proj(x)
        f = x
        b = x.flip(1) if self.bwd is not None else None
        states = []
        for k, lstm_f in enumerate(self.fwd):
            last = k == len(self.fwd) - 1
            f = self.drop(lstm_f(f)[0])
            out_f = self.h2o_f(f) if last and self.h2o_f is not None else f
            shifted_f = F.pad(out_f[:, :-1], (0, 0, 1, 0))
            if self.bwd is None:
                shifted_b = torch.zeros_like(shifted_f)
            else:
                b = self.drop(self.bwd[k](b)[0])
                out_b = self.h2o_b(b) if last and self.h2o_b is not None else b
                shifted_b = F.pad(out_b.flip(1)[:, 1:], (0, 0, 0, 1))
            states.append(torch.cat([shifted_f, shifted_b], dim=-1))
        return states


class TransformerTower(nn.Module):
    """Pre-LayerNorm transformer stack; causal (GPT, states shifted right by one) or not.

    The authors' towers are pre-LayerNorm too (DeepSpeed's ``pre_layer_norm=True``; GPT-2).
    """

    def __init__(self, config: TowerConfig, causal: bool):
        super().__init__()
        self.causal = causal
        # The authors' per-tower Linear(2H -> H) (`emb1`, `emb2`); without it, no module and
        # no state-dict key (runs cached before the option load unchanged).
        self.proj = nn.Linear(config.embed_dim, config.hidden) if config.input_proj else None
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
        states, h = [], x if self.proj is None else self.proj(x)
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=self.causal)
            states.append(h)
        states[-1] = self.norm(states[-1])
        if self.causal:  # the state that has read x_1..x_{i-1} predicts position i
            states = [F.pad(s[:, :-1], (0, 0, 1, 0)) for s in states]
        return states


class OutputHead(nn.Module):
    """BERT's prediction head on a state, decoded with the (tied) word-vector table.

    ``logits = LayerNorm(GELU(W n(h) + c)) Eᵀ + b`` with ``n`` a LayerNorm of the input
    (``in_norm``: the authors' ``layer_norm_final`` on the concatenated states) or the
    identity; ``E`` is passed at call time so the head owns no copy of the embedding (phase
    2 trains heads while ``E`` stays frozen).
    """

    def __init__(self, in_dim: int, embed_dim: int, vocab_size: int, in_norm: bool = False):
        super().__init__()
        # No module when off: the state dict of runs cached before the option is unchanged.
        self.in_norm = nn.LayerNorm(in_dim) if in_norm else None
        self.dense = nn.Linear(in_dim, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def normalise(self, h: torch.Tensor) -> torch.Tensor:
        return h if self.in_norm is None else self.in_norm(h)

    def forward(self, h: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(self.normalise(h)))), embedding, self.bias)


class UntiedHead(nn.Module):
    """The authors' phase-2 head: ``Linear(state, width)``, GELU, LayerNorm, then an untied
    ``Linear(width, vocab)`` (``ttlm/model.py``: ``dense_act1``, ``layer_norm_trans1``,
    ``outnet1``)."""

    def __init__(self, in_dim: int, width: int, vocab_size: int):
        super().__init__()
        self.dense = nn.Linear(in_dim, width)
        self.norm = nn.LayerNorm(width)
        self.decoder = nn.Linear(width, vocab_size)

    def forward(self, h: torch.Tensor, embedding: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of shape (..., vocab); ``embedding`` is ignored (the decoder is untied)."""
        return self.decoder(self.norm(F.gelu(self.dense(h))))


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
            vocab_size,
            config.embed_dim,
            seq_len,
            transformer,
            config.dropout,
            norm=transformer or config.input_proj,
        )
        self.towers = nn.ModuleList(_new_tower(config) for _ in range(2))
        self.head = OutputHead(
            2 * config.state_dim, config.embed_dim, vocab_size, in_norm=config.untied_heads
        )
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

    def head_inputs(self, h1: torch.Tensor, h2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What each tower's phase-2 head reads: the tower's states, or (``untied_heads``) its
        half of the joint head's LayerNorm of the concatenation (the authors' phase 2)."""
        if self.head.in_norm is None:
            return h1, h2
        both = self.head.normalise(torch.cat([h1, h2], dim=-1))
        return both[..., : h1.shape[-1]], both[..., h1.shape[-1] :]

    def head_logits(
        self, heads: nn.ModuleList, h1: torch.Tensor, h2: torch.Tensor
    ) -> list[torch.Tensor]:
        """Both phase-2 heads' logits (Eq. 2) from the two towers' states."""
        g1, g2 = self.head_inputs(h1, h2)
        return [heads[0](g1, self.embedding), heads[1](g2, self.embedding)]


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
    """Phase 2's two fresh heads, one per tower (seeded apart from phase 1): tied
    :class:`OutputHead` or, with ``untied_heads``, :class:`UntiedHead`."""
    torch.manual_seed(seed + 10_000)
    heads = nn.ModuleList(
        UntiedHead(config.state_dim, config.width, vocab_size)
        if config.untied_heads
        else OutputHead(config.state_dim, config.embed_dim, vocab_size)
        for _ in range(2)
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
      for the projection); one direction when ``elmo_forward_only``;
    * ``input_proj``: the tower's ``Linear(embed → width)`` (ELMo: once for both directions,
      plus ``h2o`` per direction);
    * the output head of Eq. 1 (``vocab_size`` given): the dense map ``2 s → e`` and the
      tied decoder ``e → V`` at the predicted positions only: 15 % of them for the BERT
      tower (its masking rate), all of them for the ELMo and GPT towers.

    Embedding look-ups, norms and biases are left out. Without ``vocab_size`` the head is
    left out and MFU is a lower bound.
    """
    if config.tower == "elmo":
        out = config.lstm_out
        per_dir = 0
        for layer in range(config.layers):
            n_in = config.width if layer == 0 else out
            per_dir += 4 * config.hidden * (n_in + out) + (
                config.hidden * out if config.lstm_proj else 0
            )
        if config.input_proj:
            per_dir += out * config.width  # h2o after the last layer
        directions = 1 if config.elmo_forward_only else 2
        proj = config.embed_dim * config.width if config.input_proj else 0
        towers = 2 * 6.0 * (directions * per_dir + proj)
    else:
        d, n_layers = config.hidden, config.layers
        weights = n_layers * (4 * d * d + 2 * d * config.ffn_dim)
        if config.input_proj:
            weights += config.embed_dim * d
        towers = 2 * (6.0 * weights + 12.0 * n_layers * seq_len * d)
    if vocab_size is None:
        return towers
    predicted = 0.15 if config.tower == "bert" else 1.0
    head = 2 * config.state_dim * config.embed_dim + config.embed_dim * vocab_size
    return towers + 6.0 * predicted * head
