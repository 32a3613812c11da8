"""ResNet, the CNN path: parameters and forward FLOPs per image."""

from __future__ import annotations

from gpuplan.errors import ModelConfigError
from gpuplan.specs.model.config import MAX_BLOCKS, MAX_HIDDEN, Cfg
from gpuplan.specs.model.groups import Built, Groups, Shape, num_labels
from gpuplan.specs.model.record import Family


def build_resnet(c: Cfg, _: Family) -> Built:
    """ResNet v1.5 as transformers' ResNetForImageClassification (He et al. 2016, Table 1).

    Returns also the forward FLOPs per 224x224 image: 2 x multiply-adds of every convolution
    and the classifier (BatchNorm, ReLU and pooling are not counted, as in the paper's 3.8e9
    multiply-adds for ResNet-50), and those of its stride-1 3x3 convolutions alone.
    """
    emb = c.positive(c.get_int("embedding_size", default=64), "embedding_size")
    hidden = c.int_list("hidden_sizes")
    depths = c.int_list("depths")
    if not hidden or len(hidden) != len(depths) or min(hidden) < 1:
        raise ModelConfigError(
            f"{c.name}: a resnet config needs non-empty lists 'hidden_sizes' (positive) and 'depths' of equal length."
        )
    # the blocks are listed one by one: ResNet-152 has 50 and the 1001-layer ResNet of He et al.
    # (2016, "Identity Mappings") 333, so 10,000 refuses only nonsense (10**8 blocks hung the reader)
    if sum(depths) > MAX_BLOCKS:
        raise ModelConfigError(f"{c.name}: config key 'depths' sums to {sum(depths):,} blocks; at most {MAX_BLOCKS:,}.")
    for key, value in (("hidden_sizes", max(hidden)), ("embedding_size", emb)):
        if value > MAX_HIDDEN:
            raise ModelConfigError(f"{c.name}: config key {key!r} holds {value:,}; at most {MAX_HIDDEN:,}.")
    bottleneck = c.get_str("layer_type", "bottleneck") == "bottleneck"
    reduction = 4
    channels = c.get_int("num_channels", default=3)
    labels = num_labels(c)
    image = 224
    g = Groups()
    macs = wino = 0.0
    size = image // 2  # 7x7 stride-2 stem conv
    g.vector("embedder.convolution", channels * 7 * 7 * emb, 1, "conv")
    macs += channels * 49 * emb * size * size
    g.vector("embedder.normalization", 2 * emb, 1, "norm")
    size //= 2  # 3x3 stride-2 max pool
    cin = emb
    first_stride = 2 if c.get_bool("downsample_in_first_stage", False) else 1
    for stage, (cout, depth) in enumerate(zip(hidden, depths, strict=True)):
        for block in range(depth):
            stride = (first_stride if stage == 0 else 2) if block == 0 else 1
            out_size = size // stride
            if cin != cout or stride != 1:
                g.vector("shortcut.convolution", cin * cout, 1, "conv")
                g.vector("shortcut.normalization", 2 * cout, 1, "norm")
                macs += cin * cout * out_size * out_size
            if bottleneck:
                mid = cout // reduction
                # ResNet v1.5 (torchvision, transformers): the stride sits on the 3x3 conv
                convs = [(cin, mid, 1, size, 1), (mid, mid, 3, out_size, stride), (mid, cout, 1, out_size, 1)]
            else:
                convs = [(cin, cout, 3, out_size, stride), (cout, cout, 3, out_size, 1)]
            for ci, co, k, s, st in convs:
                g.vector("layer.convolution", ci * co * k * k, 1, "conv")
                g.vector("layer.normalization", 2 * co, 1, "norm")
                macs += ci * co * k * k * s * s
                wino += ci * co * k * k * s * s if (k, st) == (3, 1) else 0.0
            cin, size = cout, out_size
    g.vector("classifier", cin * labels + labels, 1, "head")
    macs += cin * labels
    shape = Shape(cin, sum(depths), 0, 0, 0, 0, 0, None, False)
    return Built(shape, g, conv_flops=(2.0 * macs, 2.0 * wino), image_size=image)
