"""Learned observation maps phi_O (the paper's appendix): a feed-forward net with two hidden layers, every
linear layer initialised to the identity (zero bias), ReLU between layers and on the output, for L candidate
symmetries at once (a leading candidate dimension, as ``ers_deep.nets.layers``).

On non-negative observations (Hanabi's binary vector, Overcooked V2's counts) the untrained map is exactly
the identity: ReLU(I x + 0) = x three times over. ``bias`` > 0 starts every unit active instead (x + k bias
after k layers): on one-hot inputs a zero-bias identity map can never move mass to another index, since every
inactive unit sits at ReLU's kink with zero gradient. ``relu_output=False`` leaves the last layer linear. The
tabular envs' per-observation maps use both and read the output as logits of a distribution (``discovery.net``).

    ObsMap(L, n).forward(x [L, M, n]) -> [L, M, n]
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["ObsMap"]


class ObsMap(nn.Module):
    """phi_O for L candidates: x -> ReLU(W_3 ReLU(W_2 ReLU(W_1 x + b_1) + b_2) + b_3), W_k = I at init."""

    def __init__(
        self, candidates: int, size: int, layers: int = 3, bias: float = 0.0, relu_output: bool = True
    ) -> None:
        super().__init__()
        self.relu_output = bool(relu_output)
        if candidates < 1 or size < 1 or layers < 1:
            raise ValueError(
                f"ObsMap needs candidates, size, layers >= 1, got {candidates}, {size}, {layers}"
            )
        eye = torch.eye(size).expand(candidates, size, size)
        self.weights = nn.ParameterList(nn.Parameter(eye.clone()) for _ in range(layers))
        self.biases = nn.ParameterList(
            nn.Parameter(torch.full((candidates, 1, size), float(bias))) for _ in range(layers)
        )

    @property
    def candidates(self) -> int:
        return int(self.weights[0].shape[0])

    @property
    def size(self) -> int:
        return int(self.weights[0].shape[1])

    def forward(self, x: Tensor) -> Tensor:
        """[L, M, n] -> [L, M, n] (candidate l maps slice l)."""
        last = len(self.weights) - 1
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b, x, w)
            if k < last or self.relu_output:
                x = torch.relu(x)
        return x

    def select(self, index: int | list[int]) -> ObsMap:
        """A new ObsMap holding the candidates ``index`` (a copy, detached from this one's parameters)."""
        idx = [index] if isinstance(index, int) else list(index)
        out = ObsMap(len(idx), self.size, len(self.weights), relu_output=self.relu_output)
        with torch.no_grad():
            for dst, src in zip([*out.weights, *out.biases], [*self.weights, *self.biases]):
                dst.copy_(src[idx])
        return out.to(self.weights[0].device)

    def tensors(self, prefix: str = "") -> dict[str, Tensor]:
        """Its parameters as a flat dict (for a safetensors file; ``relu_output`` as a 0/1 tensor)."""
        out = {f"{prefix}{k}": v.detach() for k, v in self.state_dict().items()}
        out[f"{prefix}relu_output"] = torch.tensor(int(self.relu_output))
        return out

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor], prefix: str = "") -> ObsMap:
        """Inverse of :meth:`tensors`."""
        own = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        relu_output = bool(own.pop("relu_output", torch.tensor(1)).item())
        layers = sum(1 for k in own if k.startswith("weights."))
        if layers == 0:
            raise KeyError(f"no observation map under {prefix!r}")
        w = own["weights.0"]
        out = cls(int(w.shape[0]), int(w.shape[1]), layers, relu_output=relu_output)
        out.load_state_dict(own)
        return out
