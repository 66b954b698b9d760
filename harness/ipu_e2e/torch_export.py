"""ipu-e2e-export-model: models written elsewhere, exported to ONNX with
Debian's python3-torch and python3-torchvision, with seeded random weights,
and torch's own FP32 outputs saved beside them (the truth `--model ...
--expected` checks against).  Kinds:

- `vit`: torchvision's VisionTransformer (`--image`, `--patch`, `--layers`,
  `--heads`, `--width`, `--mlp`, `--classes`; the defaults are ViT-B/16 at
  224 x 224): a convolutional patch embedding, a class token, erf GELU,
  LayerNorm eps 1e-6, nn.MultiheadAttention, the class token's read-out;
- `encoder-block`: one pre-LayerNorm encoder block as torchvision's (the
  same nn.MultiheadAttention), with tanh GELU, on a [batch, tokens, width]
  input.

Writes FILE.onnx, beside it FILE.input.npy (standard normal, --seed) and
FILE.expected.npy, each atomically (`ipu-e2e-test --model FILE.onnx` takes
the two as its inputs and expected outputs); exit 2 naming what is missing when
torch is not installed (the Makefile installs it only for the cases that
need it).
"""
import argparse
import io
from pathlib import Path

from . import artifacts
from .command import EXIT_OK, UsageError, guarded, positive_int
from .models import beside
from .progress import Progress

OPSET = 14


def parser():
    p = argparse.ArgumentParser(prog="ipu-e2e-export-model", description=__doc__.split("\n\n")[0].replace("\n", " "))
    p.add_argument("kind", choices=("vit", "encoder-block"))
    p.add_argument("model", type=Path, metavar="FILE.onnx",
                   help="the model to write (FILE.input.npy and FILE.expected.npy go beside it)")
    p.add_argument("--batch", type=positive_int, default=1, help="images or sequences (default: 1)")
    p.add_argument("--image", type=positive_int, default=224, help="vit: image side in pixels (default: 224)")
    p.add_argument("--patch", type=positive_int, default=16, help="vit: patch side (default: 16)")
    p.add_argument("--layers", type=positive_int, default=12, help="vit: encoder layers (default: 12)")
    p.add_argument("--heads", type=positive_int, default=12, help="attention heads (default: 12)")
    p.add_argument("--width", type=positive_int, default=768, help="hidden width (default: 768)")
    p.add_argument("--mlp", type=positive_int, default=3072, help="MLP width (default: 3072)")
    p.add_argument("--classes", type=positive_int, default=1000, help="vit: classes of the head (default: 1000)")
    p.add_argument("--tokens", type=positive_int, default=16, help="encoder-block: tokens (default: 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the input (default: 0)")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return p


def torch_modules():
    try:
        import torch
        import torchvision
    except ImportError:
        raise UsageError("exporting needs Debian's python3-torch and python3-torchvision "
                         "(apt-get install python3-torch python3-torchvision)") from None
    return torch, torchvision


def encoder_block(torch, args):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = torch.nn.LayerNorm(args.width, eps=1e-6)
            self.self_attention = torch.nn.MultiheadAttention(args.width, args.heads, batch_first=True)
            self.ln_2 = torch.nn.LayerNorm(args.width, eps=1e-6)
            self.fc1, self.fc2 = torch.nn.Linear(args.width, args.mlp), torch.nn.Linear(args.mlp, args.width)
            self.act = torch.nn.GELU(approximate="tanh")

        def forward(self, x):
            y = self.ln_1(x)
            y, _ = self.self_attention(y, y, y, need_weights=False)
            x = x + y
            return x + self.fc2(self.act(self.fc1(self.ln_2(x))))

    return Block(), torch.randn(args.batch, args.tokens, args.width)


def vit(torch, torchvision, args):
    from torchvision.models.vision_transformer import VisionTransformer
    model = VisionTransformer(image_size=args.image, patch_size=args.patch, num_layers=args.layers,
                              num_heads=args.heads, hidden_dim=args.width, mlp_dim=args.mlp,
                              num_classes=args.classes)
    # torchvision zeroes the head; random weights make its outputs worth checking.
    torch.nn.init.normal_(model.heads.head.weight, std=args.width ** -0.5)
    return model, torch.randn(args.batch, 3, args.image, args.image)


def work(args, progress):
    torch, torchvision = torch_modules()
    import numpy as np
    from . import npy
    torch.manual_seed(args.seed)
    progress.update(f"building the {args.kind}")
    model, x = vit(torch, torchvision, args) if args.kind == "vit" else encoder_block(torch, args)
    model.eval()
    with torch.no_grad():
        expected = model(x)
    progress.update(f"exporting {args.model}")
    buffer = io.BytesIO()
    try:  # with gradients on: nn.MultiheadAttention's fused inference path has no ONNX export
        torch.onnx.export(model, x, buffer, opset_version=OPSET, input_names=["input"], output_names=["output"])
    except Exception as error:  # torch.onnx's own errors
        raise UsageError(f"torch could not export the {args.kind}: {str(error).splitlines()[0]}") from None
    artifacts.write_bytes(args.model, buffer.getvalue())
    for name, value in (("input", x), ("expected", expected)):
        array = value.numpy().astype(np.float32)
        npy.write_npy(beside(args.model, name), array.tobytes(), "float32", array.shape)
    progress.done()
    print(f"{args.model} ({len(buffer.getvalue()):,} bytes), {beside(args.model, 'input').name} {tuple(x.shape)}, "
          f"{beside(args.model, 'expected').name} {tuple(expected.shape)}")
    return EXIT_OK


def main(argv=None):
    args = parser().parse_args(argv)
    progress = Progress(args.quiet)
    code, result = guarded("ipu-e2e-export-model", progress, lambda: work(args, progress))
    return code if code is not None else result
