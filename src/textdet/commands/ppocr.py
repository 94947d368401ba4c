"""``textdet convert ppocr``: a PP-OCR detection model (ONNX export) -> ``DIR/model.ckpt`` +
``DIR/<name>.yaml``, layers matched by graph order, folded BatchNorms and the threshold branch filled in
(docs/decisions/ppocr-import.md)."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
import yaml
from torch import nn

from textdet.errors import TextdetError
from textdet.models import build_model
from textdet.models.lcnetv3 import LearnableAffine
from textdet.runtime.checkpoint import atomic_save

RECIPE = Path(__file__).parents[1] / "recipes" / "synthetic_dbnet_r18.yaml"
# PaddleOCR configs/det/PP-OCRv4/PP-OCRv4_mobile_det.yml; PP-OCRv5_mobile_det.yml is the same network
PPOCR_V4_DET = {
    "backbone": {"name": "PPLCNetV3", "scale": 0.75, "det": True},
    "neck": {"name": "RSEFPN", "out_channels": 96},
    "head": {"name": "DBHead", "k": 50, "bias": False, "adaptive": True},
}
# PaddleOCR configs/det/PP-OCRv6/PP-OCRv6_small_det.yml, less DBHead's training-only auxiliary heads
PPOCR_V6_SMALL_DET = {
    "backbone": {"name": "PPLCNetV4", "model_size": "small", "det": True},
    "neck": {"name": "RepLKFPN", "out_channels": 96, "dilated_kernel_size": 7},
    "head": {"name": "DBHead", "k": 50, "bias": False, "adaptive": True},
}
# PaddleOCR's 0-1 ImageNet values times 255 (NormalizeImage takes 0-255 pixels), applied to B, G, R
IMAGENET_MEAN, IMAGENET_STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


class Architecture(NamedTuple):
    """A PP-OCR detection network textdet imports, and the preprocessing its releases were trained with.

    ``mean``/``std`` (0-255 scale) apply to the channels in PaddleOCR's order: BGR, as its DecodeImage
    reads them.
    """

    name: str
    network: dict
    mean: list[float]
    std: list[float]


ARCHITECTURES = [
    Architecture("PP-OCRv4/v5 mobile det (PPLCNetV3 x0.75 + RSEFPN)", PPOCR_V4_DET,
                 IMAGENET_MEAN, IMAGENET_STD),
    Architecture("PP-OCRv6 small det (PPLCNetV4 small + RepLKFPN)", PPOCR_V6_SMALL_DET,
                 IMAGENET_MEAN, IMAGENET_STD),
]
# Official releases of an architecture, told apart by their first convolution's weights
# (sha256, first 16 hex digits).
RELEASES = {
    "8debc2f677485be9": "PP-OCRv4 mobile det",
    "95931975df4fe354": "PP-OCRv5 mobile det",
    "c9397a699383d63d": "PP-OCRv6 small det",
}
# The fine-tuning learning rate (Adam, whole network) per release; other weights get FINE_TUNE_LR, the
# highest at which PP-OCRv5's weights did not collapse to an empty map
# (docs/decisions/ppocr-fine-tuning-recipe.md).
RELEASE_FINE_TUNE_LR = {"PP-OCRv4 mobile det": 1e-3}
FINE_TUNE_LR = 3e-4
# The backbone's share of that rate (optimizer.lr_mult), per release; other weights: the full rate. A tenth
# keeps PP-OCRv4's early epochs above its start; PP-OCRv5 scores no higher with it, and v6 is not measured.
RELEASE_BACKBONE_LR_MULT = {"PP-OCRv4 mobile det": 0.1}
# The schedule, for every release (docs/decisions/ppocr-fine-tuning-recipe.md): 10 epochs of
# 640 x 640 windows cut from the photos resized to a 736 px short side (a window costs the same whatever the
# photo's size: a small photo enlarged to that size no longer costs more than a large one), at least
# FINE_TUNE_EPOCH_SAMPLES windows an epoch (a few hundred photos are passed over several times), and an
# evaluation at the middle and at the last epoch (one of 500 photos at EVAL_RESIZE costs about as much as
# 720 steps: the start guard's set-aside photos say how the run goes at a fifth of that).
# ICDAR2015's 1,000 training photos: 10 x 900 windows; 250 photos: 10 x 450.
FINE_TUNE_EPOCHS = 10
FINE_TUNE_CROP = [640, 640]
FINE_TUNE_EPOCH_SAMPLES = 450
FINE_TUNE_VAL_INTERVAL = 5
# loss.gap_weight: the weight of the penalty on P in the band around each word (DBLoss), which teaches a line
# detector the gaps between words; a heavier weight learns faster but ends level
# (docs/decisions/gap-penalty.md).
GAP_WEIGHT = 0.1
_KINDS = {nn.Conv2d: "conv", nn.ConvTranspose2d: "convT", nn.BatchNorm2d: "bn", LearnableAffine: "affine"}


class Layer(NamedTuple):
    """One parameterised layer of the graph: ``tensors`` in the order of the torch module's state_dict."""

    kind: str
    node: str
    tensors: list[np.ndarray]


def read_onnx_layers(path: str | os.PathLike) -> list[Layer]:
    """Convs (+bias, also as a following Add), transposed convs, BatchNorms and scalar affines, in graph order."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise TextdetError("textdet convert ppocr reads ONNX files with the onnx package: pip install onnx") from None
    try:
        graph = onnx.load(str(path)).graph
    except Exception as e:  # protobuf's and onnx's own errors: name the file
        raise TextdetError(f"cannot read ONNX model {path}: {e}") from None
    const = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            const[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        elif n.op_type == "Identity" and n.input[0] in const:  # torch's exporter shares equal initializers
            const[n.output[0]] = const[n.input[0]]
        elif n.op_type == "Reshape" and n.input[0] in const and n.input[1] in const:  # PP-OCRv5's conv biases
            shape = const[n.input[1]]
            if 0 not in shape:  # ONNX's 0 (copy a dimension) means nothing to numpy
                const[n.output[0]] = const[n.input[0]].reshape(shape)
    consumers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    def follower_const(node, size: int, ndim: int | None = None) -> np.ndarray | None:
        """The constant of the single Add consuming ``node``'s output (through Identities), if of ``size``."""
        nxt = consumers.get(node.output[0], [])
        while len(nxt) == 1 and nxt[0].op_type == "Identity":  # paddle2onnx's renames (PP-OCRv6)
            nxt = consumers.get(nxt[0].output[0], [])
        if len(nxt) != 1 or nxt[0].op_type != "Add":
            return None
        c = next((const[i] for i in nxt[0].input if i in const), None)
        return c if c is not None and c.size == size and (ndim is None or c.ndim == ndim) else None

    layers = []
    for n in graph.node:
        if n.op_type in ("Conv", "ConvTranspose"):
            weight = const.get(n.input[1])
            if weight is None:
                raise TextdetError(f"{path}: {n.op_type} {n.name or n.output[0]} has a computed weight; not an export")
            out_channels = weight.shape[0] if n.op_type == "Conv" else weight.shape[1]
            if len(n.input) > 2 and n.input[2]:
                bias = const.get(n.input[2])
            else:  # a bias added by the next node
                bias = follower_const(n, out_channels)
            kind = "conv" if n.op_type == "Conv" else "convT"
            tensors = [weight] if bias is None else [weight, bias.reshape(-1)]
            layers.append(Layer(kind, n.output[0], tensors))
        elif n.op_type == "BatchNormalization":
            layers.append(Layer("bn", n.output[0], [const[i] for i in n.input[1:5]]))
        elif n.op_type == "Mul":  # a learnable affine: Mul by a shape-(1,) tensor, then Add of one
            scale = next((const[i] for i in n.input if i in const), None)
            bias = follower_const(n, 1, ndim=1) if scale is not None and scale.shape == (1,) else None
            if bias is not None:
                layers.append(Layer("affine", n.output[0], [scale, bias]))
    return layers


def _execution_order(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The parameterised leaf modules an eval forward runs, in order (hooks on a 64x64 input)."""
    names = {m: name for name, m in model.named_modules()}
    seen: list[tuple[str, nn.Module]] = []
    hooks = [m.register_forward_hook(lambda m, i, o: seen.append((names[m], m)))
             for m in model.modules() if type(m) in _KINDS]
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(1, 3, 64, 64))
    finally:
        for h in hooks:
            h.remove()
    return seen


def _identity_batchnorm(name: str, module: nn.BatchNorm2d, state: dict[str, torch.Tensor],
                        bias: np.ndarray | None) -> dict[str, torch.Tensor]:
    """State of a BatchNorm the export folded into the conv before it: an identity (mean 0, var 1 - eps,
    weight 1) that adds ``bias`` (the conv's folded bias), or 0 where the conv kept its own bias."""
    ones = torch.ones_like(state[f"{name}.weight"])
    return {
        f"{name}.weight": ones,
        f"{name}.bias": torch.zeros_like(ones) if bias is None else torch.from_numpy(bias),
        f"{name}.running_mean": torch.zeros_like(ones),
        f"{name}.running_var": ones - module.eps,
    }


def load_onnx_layers(model: nn.Module, layers: list[Layer], source: str) -> dict[str, torch.Tensor]:
    """Assign ``layers`` to ``model``'s modules in execution order -> state_dict; a mismatch names the first
    layer that does not fit.

    A BatchNorm the export folded into the conv before it becomes an identity (running mean 0, var 1 - eps,
    weight 1) whose bias is the conv's folded bias when textdet's conv has no bias of its own, else 0.
    """
    state = model.state_dict()
    position = 0  # index in ``layers`` of the next layer to assign
    folded_bias = None  # an ONNX conv's bias textdet's conv has no room for: the next BatchNorm takes it
    after_conv = False  # whether the module just filled was a (transposed) convolution
    for name, module in _execution_order(model):
        kind = _KINDS[type(module)]
        layer = layers[position] if position < len(layers) else None
        folded_away = kind == "bn" and after_conv and (layer is None or layer.kind != "bn")  # by the export
        if folded_away:
            state.update(_identity_batchnorm(name, module, state, folded_bias))
            folded_bias = None
            after_conv = False
            continue
        keys = [f"{name}.{key}" for key, _ in module.named_parameters(recurse=False)]
        if kind == "bn":
            keys += [f"{name}.running_mean", f"{name}.running_var"]
        want = (kind, [tuple(state[key].shape) for key in keys])
        if layer is None:
            raise TextdetError(f"{source}: layer {position} (none left) does not fit textdet's {name} "
                               f"{want}")
        got_shapes = [tuple(t.shape) for t in layer.tensors]
        # an ONNX conv with a bias where textdet's conv has none: the bias goes to the BatchNorm after it
        extra_bias = kind == "conv" and len(got_shapes) == 2 and len(want[1]) == 1
        compared = (layer.kind, got_shapes[:1] if extra_bias else got_shapes)
        if compared != want or folded_bias is not None:  # or a folded bias no BatchNorm took
            raise TextdetError(f"{source}: layer {position} ({layer.node}: {(layer.kind, got_shapes)}) does "
                               f"not fit textdet's {name} {want}")
        for key, tensor in zip(keys, layer.tensors, strict=False):
            state[key] = torch.from_numpy(np.array(tensor, dtype=np.float32))
        folded_bias = layer.tensors[1].astype(np.float32) if extra_bias else None
        after_conv = kind in ("conv", "convT")
        position += 1
    if position < len(layers):
        left_over = len(layers) - position
        raise TextdetError(f"{source}: {left_over} layers left over after the model was filled, first "
                           f"{layers[position].node}")
    return state


def identify(layers: list[Layer], source: str) -> tuple[Architecture, dict[str, torch.Tensor], str]:
    """The architecture whose modules ``layers`` fill, its state_dict, and the release name (or "unknown
    weights of ...").

    An ONNX file that fits none raises a TextdetError naming what it holds and what textdet supports.
    """
    misfits = []
    for arch in ARCHITECTURES:
        model = build_model(**arch.network)
        try:
            state = load_onnx_layers(model, layers, source)
        except TextdetError as misfit:
            misfits.append(f"  {arch.name}: {misfit}")
            continue
        first_weight = np.ascontiguousarray(layers[0].tensors[0], dtype=np.float32)
        fingerprint = hashlib.sha256(first_weight.tobytes()).hexdigest()[:16]
        release = RELEASES.get(fingerprint, f"unknown weights of {arch.name} (fingerprint {fingerprint})")
        return arch, state, release
    if layers:
        found = f"{len(layers)} parameterised layers, the first {layers[0].kind} {layers[0].node} " \
                f"{[tuple(t.shape) for t in layers[0].tensors]}"
    else:
        found = "no convolution, BatchNorm or affine layer"
    supported = ", ".join(arch.name for arch in ARCHITECTURES)
    raise TextdetError(f"{source} is not a PP-OCR detector textdet can import: it holds {found}. Supported: "
                       f"{supported}. How each one differs:\n" + "\n".join(misfits))


def fill_threshold_branch(state: dict[str, torch.Tensor], start: float = 0.3) -> None:
    """The threshold branch inference exports leave out: the probability branch's layers, the last one set
    to a constant map T = ``start`` (BorderMap's thresh_min, and binary_thresh).

    The copied layers give features that already respond to text. A plain copy of the last layer too would
    make T equal P, so that B = sigmoid(k (P - T)) starts at 0.5 everywhere and its Dice loss, through
    k = 50, pushes the shared layers away from the imported detector in the first steps; with T = 0.3, B
    starts as the imported detector's own binarisation (docs/decisions/ppocr-import.md).
    """
    for key in [k for k in state if k.startswith("head.segm.")]:
        state["head.thresh." + key.removeprefix("head.segm.")] = state[key].clone()
    last = max(int(k.split(".")[2]) for k in state if k.startswith("head.thresh."))
    state[f"head.thresh.{last}.weight"].zero_()
    state[f"head.thresh.{last}.bias"].fill_(math.log(start / (1 - start)))


def _set_dataset(split: dict, data_dir: str, label_file: str) -> None:
    """MindOCR's ICDAR2015 layout, under a dataset_root the user gives with -o."""
    split["dataset"].update(dataset_root="./data", data_dir=data_dir, label_file=label_file)


# Training windows are cut from photos resized to a 736 px short side, as PaddleOCR's det configs evaluate
# ICDAR2015 (DetResizeForTest). Evaluation enlarges a little more, where small words gain, at 1.6 times an
# evaluation's time; larger sizes lose again (docs/decisions/ppocr-fine-tuning-recipe.md).
TRAIN_RESIZE = {"limit_type": "min", "limit_side_len": 736, "divisor": 32, "rounding": "nearest"}
EVAL_RESIZE = {**TRAIN_RESIZE, "limit_side_len": 864}


def ppocr_config(ckpt: str, name: str, arch: Architecture, release: str) -> dict:
    """The built-in recipe with PaddleOCR's network, pre- and post-processing and fine-tuning defaults.

    Data in MindOCR's layout (``train/images`` + ``train_gt.txt``, ``val/images`` + ``test_gt.txt``);
    ``release`` (the name ``identify`` gives) picks the learning rate. The fine-tuning defaults and why:
    docs/decisions/fine-tuning-defaults.md and docs/decisions/ppocr-fine-tuning-recipe.md.
    """
    cfg = yaml.safe_load(RECIPE.read_text())
    cfg["model"] = {"type": "det", "transform": None, **arch.network, "pretrained": ckpt, "resume": False}
    cfg["postprocess"].update(binary_thresh=0.3, box_thresh=0.6, expand_ratio=1.5)  # det_db_* defaults
    # Fine-tuning defaults (docs/decisions/fine-tuning-defaults.md): BatchNorms on their imported
    # statistics, PaddleOCR's Dice loss on P plus the gap penalty (P pushed to 0 in the band around each
    # word, where a line detector's P is saturated), no threshold branch (inference uses P alone; the branch
    # cost a seventh of each step and bought no f-score), the whole network learning (a frozen backbone and
    # neck kept the word gaps out of reach), Adam at the release's learning rate with half an epoch of
    # warm-up, and photos resized to PaddleOCR's evaluation size (crops rescaled into a small square taught
    # another scale and cost precision), then cut to a 640 x 640 window around a random word
    # (FINE_TUNE_CROP: whole photos cost 2.3x a window's step). One window a step, four steps to an update.
    # The last two epochs' checkpoints next to best.ckpt, which is picked on the evaluation split: the last
    # epoch (always evaluated, so guarded and with its re-chosen thresholds) is the fair score there.
    # amp auto: bf16 where the CPU has it natively (PPLCNetV4's large depthwise kernels run 2.7x faster
    # there), fp32 where bf16 would be emulated.
    cfg["system"].update(amp_level="auto", val_interval=FINE_TUNE_VAL_INTERVAL,
                         val_start_epoch=FINE_TUNE_VAL_INTERVAL, ckpt_save_policy="latest_k")
    cfg["model"]["head"] = {**cfg["model"]["head"], "adaptive": False}
    cfg["loss"]["bce_replace"] = "diceloss"
    # The start guard: a tenth of the training photos set aside to compare each epoch's model with the
    # imported one, which is kept where fine-tuning does not beat it (photos it already fits: receipts).
    # They also re-choose the thresholds for the fine-tuned model: its probability map's calibration moves.
    cfg["train"].update(freeze_bn=True, gradient_accumulation_steps=4, guard_holdout=0.1,
                        guard_thresholds=True)
    cfg["train"]["loader"]["batch_size"] = 1
    lr = RELEASE_FINE_TUNE_LR.get(release, FINE_TUNE_LR)
    cfg["scheduler"].update(lr=lr, num_epochs=FINE_TUNE_EPOCHS, warmup_epochs=0.5)
    if release in RELEASE_BACKBONE_LR_MULT:
        cfg["optimizer"]["lr_mult"] = {"backbone": RELEASE_BACKBONE_LR_MULT[release]}
    cfg["train"]["ckpt_save_dir"], cfg["eval"]["ckpt_load_path"] = f"./runs/{name}", ckpt
    cfg["eval"]["loader"]["batch_size"] = 1  # image sizes differ under 'min' resizing
    _set_dataset(cfg["train"], "train/images", "train_gt.txt")
    _set_dataset(cfg["eval"], "val/images", "test_gt.txt")
    for split in ("train", "eval"):
        pipeline = []
        for step in cfg[split]["dataset"]["transform_pipeline"]:
            op = next(iter(step))
            if op == "DecodeImage":  # PaddleOCR normalises BGR pixels
                step[op]["img_mode"] = "BGR"
            elif op == "NormalizeImage":
                step[op].update(mean=list(arch.mean), std=list(arch.std))  # copies: no YAML anchors
            elif op == "RandomScale" or (op == "BorderMap" and split == "eval"):
                continue
            elif op in ("RandomCropWithBBox", "DetResize"):
                step = {"DetResize": dict(TRAIN_RESIZE if split == "train" else EVAL_RESIZE)}
            pipeline.append(step)
            if split == "train" and op == "RandomCropWithBBox":  # a window at a scale near the evaluation's
                pipeline.append({"RandomTextCrop": {"crop_size": list(FINE_TUNE_CROP)}})
        cfg[split]["dataset"]["transform_pipeline"] = pipeline
    # P's targets and BorderMap's band around each word, where the gap penalty pushes P to 0: the threshold
    # branch does not train, but PP-OCR draws lines and ICDAR2015-style labels are words
    # (docs/decisions/gap-penalty.md)
    train_columns = ["image", "binary_map", "mask", "thresh_map", "thresh_mask"]
    cfg["train"]["dataset"].update(output_columns=train_columns, label_column_index=[1, 2, 3, 4],
                                   min_epoch_samples=FINE_TUNE_EPOCH_SAMPLES)
    cfg["loss"]["gap_weight"] = GAP_WEIGHT
    return cfg


def convert_ppocr(model_path: str, out_dir: str, name: str | None = None) -> dict:
    """Import a PP-OCR det ONNX model: write ``out_dir/model.ckpt`` and ``out_dir/<name>.yaml``.

    Nothing is written unless the model is recognised: a failed import leaves no output folder behind.
    """
    if not os.path.isfile(model_path):
        raise TextdetError(f"PP-OCR model not found: {model_path}")
    if not str(model_path).endswith(".onnx"):
        raise TextdetError(f"{model_path}: give the ONNX export (e.g. ch_PP-OCRv4_det_infer.onnx from the "
                           "rapidocr-onnxruntime wheel, or paddle2onnx's output for a Paddle inference model)")
    name = name or Path(model_path).stem
    arch, state, release = identify(read_onnx_layers(model_path), model_path)
    model = build_model(**arch.network)
    fill_threshold_branch(state)
    model.load_state_dict(state)
    os.makedirs(out_dir, exist_ok=True)
    ckpt, yaml_path = os.path.abspath(os.path.join(out_dir, "model.ckpt")), os.path.join(out_dir, f"{name}.yaml")
    source = os.path.basename(model_path)
    atomic_save({"model": model.state_dict(), "source": source, "release": release}, ckpt)
    header = (f"# {name}: {release}, imported by `textdet convert ppocr` from {source}; see\n"
              "# docs/guides/finetune-ppocr.md. Data in MindOCR's layout (train/images + train_gt.txt,\n"
              "# val/images + test_gt.txt). Fine-tune:\n"
              f"# textdet train -c {yaml_path} -o train.dataset.dataset_root=DATA\n"
              "#     -o eval.dataset.dataset_root=DATA\n")
    config = ppocr_config(ckpt, name, arch, release)
    Path(yaml_path).write_text(header + yaml.safe_dump(config, sort_keys=False))
    return {"checkpoint": ckpt, "config": yaml_path, "tensors": len(state), "release": release}
