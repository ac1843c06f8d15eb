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


class ChannelMoments(torch.nn.Module):
    """Almost free, with signal under the mean fill: each channel's mean and mean square
    through a fixed linear layer. :class:`ChannelMeans` gives the same score for every sample
    under the mean fill (each hidden region takes its own mean colour, so the channel means do
    not move); the mean squares do: a region hidden loses its texture."""

    def __init__(self, classes: int = 4, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(torch.randn(6, classes, generator=g), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.mean(dim=(2, 3)), (x * x).mean(dim=(2, 3))], 1) @ self.w * 4


class Recorder(torch.nn.Module):
    """Wraps a model and keeps every batch it was given (for tests on what the model saw)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.batches: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batches.append(x.detach().clone())
        return self.inner(x)


class OneStrongTenWeak(torch.nn.Module):
    """Class 0's score: 4 x the mean of box 0, plus 0.4 x the mean of each of ten equal boxes
    1..10, plus a deterministic wobble of the whole image (a pseudo-noise, 0.3 sin(997 sum x)).
    With :func:`boxes` as the regions, region 0 is firmly first and the ten weak regions are
    tied: their order is decided by the wobble alone. Class 1's score is 0."""

    def __init__(self, size: int = 48) -> None:
        super().__init__()
        self.size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seg = torch.from_numpy(boxes(self.size))
        v = torch.stack([x[:, :, seg == i].mean(dim=(1, 2)) for i in range(11)], 1)
        wobble = 0.3 * torch.sin(997.0 * x.double().sum(dim=(1, 2, 3))).float()
        score = 4.0 * v[:, 0] + 0.4 * v[:, 1:].sum(1) + wobble
        return torch.stack([score, torch.zeros_like(score)], 1)


def boxes(size: int = 48):
    """The regions of :class:`OneStrongTenWeak`: box 0 (12 x 12 px), ten 8 x 8 px boxes 1..10,
    and the background (11)."""
    import numpy as np

    seg = np.full((size, size), 11, np.int64)
    seg[2:14, 2:14] = 0
    for i in range(10):
        r, c = divmod(i, 4)
        seg[16 + 10 * r : 24 + 10 * r, 4 + 10 * c : 12 + 10 * c] = i + 1
    return seg


class LinearConv(torch.nn.Module):
    """Linear in the pixels like :class:`LinearPixels`, but through a ``Conv2d`` (3 -> 4
    channels, 3x3, no nonlinearity), so that Grad-CAM has a layer: f(x)_c = sum(V_c * conv(x))
    + b_c. Its gradient is the same at every x, so region r's true contribution is
    sum over r of grad f . (x - fill)."""

    def __init__(self, shape: tuple[int, int], classes: int = 3, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        with torch.no_grad():
            self.conv.weight.copy_(torch.randn(4, 3, 3, 3, generator=g) / 3)
            self.conv.bias.copy_(torch.randn(4, generator=g))
        self.v = torch.nn.Parameter(
            torch.randn(classes, 4, *shape, generator=g), requires_grad=False
        )
        self.b = torch.nn.Parameter(torch.randn(classes, generator=g), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.conv(x)
        return torch.einsum("nchw,kchw->nk", a.double(), self.v.double()).float() + self.b


class GapCNN(torch.nn.Module):
    """A convolution (3 -> 5 channels, 3x3, stride 2), global average pooling and a linear
    layer, with no nonlinearity: the network for which Grad-CAM is exactly the class
    activation map, ReLU(sum_k fc[c, k] A_k) / (h' w') (Selvaraju et al. 2017, section 3.1)."""

    def __init__(self, classes: int = 3, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.conv = torch.nn.Conv2d(3, 5, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(5, classes)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) / 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x).mean(dim=(2, 3)))
