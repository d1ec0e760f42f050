"""The models torch.compile on mydev is validated and benchmarked with.

Each entry builds a small model, an input batch and a loss, on any device,
from a seed, so the same model can be run compiled on mydev, eagerly on the
CPU and compiled on the CPU, and compared. tests/test_compile_models.py checks
values and gradients; benchmarks/compile.py times them. ``size`` scales the
models: "test" keeps compile and run time low ("tiny" lower still, for the
interpreted Triton kernels); "bench" is big enough that
kernel time dominates launch overhead, with a width at which normalization,
activations and residuals (what compilation fuses) are a real share of the
work next to the matrix multiplies (at widths of 256 and more the models are
bound by matrix multiplies, which eager and compiled code run alike).
"""

from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

_SIZES = {
    # name: (batch, width, sequence length)
    "test": (4, 32, 16),
    # For the Triton kernel language, whose kernels the simulator interprets.
    "tiny": (2, 16, 8),
    "bench": (32, 64, 256),
}


class MLP(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(width, 4 * width),
            nn.GELU(),
            nn.Linear(4 * width, 4 * width),
            nn.ReLU(),
            nn.Linear(4 * width, width),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class SmallCNN(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        channels = max(8, width // 8)
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.BatchNorm2d(2 * channels),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(2 * channels, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class TransformerBlock(nn.Module):
    """Pre-norm attention (through scaled_dot_product_attention) and a GELU MLP."""

    def __init__(self, width: int, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def query_key_value(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """q, k and v of the normed input, [batch, heads, seq, head size]."""
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        return tuple(t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.query_key_value(x)
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class DropoutTransformerBlock(TransformerBlock):
    """TransformerBlock's layers in a GPT-2 block as Hugging Face
    transformers writes it: an additive causal mask and dropout on the
    attention weights (which send scaled_dot_product_attention down its math
    path), and dropout on each residual branch."""

    def __init__(self, width: int, heads: int = 4, dropout: float = 0.1):
        super().__init__(width, heads)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.query_key_value(x)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        mask = torch.zeros(seq, seq, device=x.device).masked_fill(~causal, float("-inf"))
        p = self.dropout if self.training else 0.0
        attention = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        x = x + F.dropout(self.proj(attention.transpose(1, 2).reshape(batch, seq, width)), p, self.training)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.norm2(x)))), p, self.training)


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class RMSNormSwiGLUBlock(nn.Module):
    """The feed-forward half of a Llama-style block."""

    def __init__(self, width: int):
        super().__init__()
        hidden = 8 * width // 3
        self.norm = RMSNorm(width)
        self.gate = nn.Linear(width, hidden, bias=False)
        self.up = nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


@dataclass(frozen=True)
class ModelCase:
    name: str
    build: Callable[[int], nn.Module]
    input_shape: Callable[[int, int, int], Tuple[int, ...]]

    def make(self, size: str, device: str, seed: int = 0) -> Tuple[nn.Module, torch.Tensor]:
        """The model (in train mode) and an input batch, identical for every
        device given the same seed."""
        batch, width, seq = _SIZES[size]
        generator = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = self.build(width)
        x = torch.randn(self.input_shape(batch, width, seq), generator=generator)
        return model.to(device), x.to(device)


def loss_fn(output: torch.Tensor) -> torch.Tensor:
    """A loss that depends on every output element."""
    return output.float().pow(2).mean()


CASES: Dict[str, ModelCase] = {
    case.name: case
    for case in (
        ModelCase("mlp", MLP, lambda b, w, s: (b * s, w)),
        ModelCase("cnn", SmallCNN, lambda b, w, s: (b, 3, s // 2, s // 2)),
        ModelCase("transformer_block", TransformerBlock, lambda b, w, s: (b, s, w)),
        ModelCase("rmsnorm_swiglu_block", RMSNormSwiGLUBlock, lambda b, w, s: (b, s, w)),
    )
}

# Models whose training draws random numbers (dropout): timed by
# benchmarks/compile.py, not in CASES, whose tests compare results with the
# CPU's value for value.
RANDOM_CASES: Dict[str, ModelCase] = {
    case.name: case
    for case in (ModelCase("dropout_transformer_block", DropoutTransformerBlock, lambda b, w, s: (b, s, w)),)
}
