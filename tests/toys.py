"""Toy models whose true attributions are known (imported by the tests)."""

import torch


class LinearPixels(torch.nn.Module):
    """Scores linear in the pixel values: f(x)_c = sum(W_c * x) + b_c."""

    def __init__(self, shape: tuple[int, int], classes: int = 3, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(
            torch.randn(classes, 3, *shape, generator=g), requires_grad=False
        )
        self.b = torch.nn.Parameter(torch.randn(classes, generator=g), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("nchw,kchw->nk", x.double(), self.w.double()).float() + self.b


class ChannelMeans(torch.nn.Module):
    """Almost free: mean colour through a fixed linear layer."""

    def __init__(self, classes: int = 4, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(torch.randn(3, classes, generator=g), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3)) @ self.w


class Recorder(torch.nn.Module):
    """Wraps a model and keeps every batch it was given (for tests on what the model saw)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.batches: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batches.append(x.detach().clone())
        return self.inner(x)
