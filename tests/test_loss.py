"""DBLoss: known answers on tiny hand-built maps."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from textdet.config.components import build_component
from textdet.errors import ConfigError
from textdet.loss import LOSSES, DBLoss, topk_mask


def _targets(n: int = 2, h: int = 16, w: int = 16) -> dict[str, torch.Tensor]:
    """A 6x8 text rectangle per image, everything supervised, a border band for the threshold map."""
    gt = torch.zeros(n, 1, h, w)
    gt[:, :, 4:10, 3:11] = 1.0
    thresh_map = torch.full((n, h, w), 0.3)
    thresh_map[:, 2:12, 1:13] = 0.7
    thresh_mask = torch.zeros(n, h, w)
    thresh_mask[:, 2:12, 1:13] = 1.0
    return {"binary_map": gt, "mask": torch.ones(n, h, w), "thresh_map": thresh_map, "thresh_mask": thresh_mask}


def test_perfect_prediction_is_zero():
    """P = B = gt and T = thresh_map: BCE 0, L1 0, Dice eps / (2 * 48 * n)."""
    t = _targets()
    preds = {"binary": t["binary_map"].clone(), "thresh": t["thresh_map"][:, None], "thresh_binary": t["binary_map"]}
    out = DBLoss()(preds, **t)
    assert set(out) == {"loss", "loss_prob", "loss_thresh", "loss_binary"}
    assert all(v.dtype == torch.float32 and v.dim() == 0 for v in out.values())
    assert out["loss"].item() < 1e-3


def test_masked_pixels_do_not_change_the_loss():
    """Whatever P, B say where mask == 0 and T says where thresh_mask == 0 is ignored."""
    t = _targets()
    t["mask"][:, :, :5] = 0.0  # the left 5 columns (part of the text too) are not supervised
    g = torch.Generator().manual_seed(0)
    p, tt, b = (torch.rand(2, 1, 16, 16, generator=g) for _ in range(3))
    base = DBLoss()({"binary": p, "thresh": tt, "thresh_binary": b}, **t)
    m, tm = t["mask"][:, None] == 0, t["thresh_mask"][:, None] == 0
    p2, b2 = torch.where(m, 1.0 - p, p), torch.where(m, torch.rand(p.shape, generator=g), b)
    t2 = torch.where(tm, torch.rand(tt.shape, generator=g), tt)
    other = DBLoss()({"binary": p2, "thresh": t2, "thresh_binary": b2}, **t)
    for k in base:
        assert torch.allclose(base[k], other[k], atol=1e-6), k


def _ohem_case() -> tuple[torch.Tensor, torch.Tensor]:
    """1x1x4x4 map, everything supervised::

        P (probabilities)          gt
        0.5   0.25  0.9   0.1      1 1 0 0
        0.8   0.2   0.7   0.15     0 0 0 0
        0.6   0.3   0.4   0.05     0 0 0 0
        0.45  0.35  0.55  0.01     0 0 0 0

    2 positives -> nneg = min(14, 3 * 2) = 6 negatives kept: the largest -log(1 - p), i.e.
    p = 0.9, 0.8, 0.7, 0.6, 0.55, 0.45 (not 0.4, 0.35, ...).
    """
    p = torch.tensor(
        [[0.5, 0.25, 0.9, 0.1], [0.8, 0.2, 0.7, 0.15], [0.6, 0.3, 0.4, 0.05], [0.45, 0.35, 0.55, 0.01]]
    ).view(1, 1, 4, 4)
    gt = torch.zeros(1, 1, 4, 4)
    gt[0, 0, 0, :2] = 1.0
    return p, gt


def test_ohem_keeps_exactly_the_hardest_negatives():
    p, gt = _ohem_case()
    p.requires_grad_(True)
    out = DBLoss()({"binary": p}, gt, torch.ones(1, 4, 4))
    hard = [0.9, 0.8, 0.7, 0.6, 0.55, 0.45]
    expected = (-math.log(0.5) - math.log(0.25) - sum(math.log(1 - q) for q in hard)) / (2 + 6 + 1e-6)
    assert out["loss_prob"].item() == pytest.approx(expected, rel=1e-6)
    assert out["loss"].item() == pytest.approx(expected, rel=1e-6)  # P only: L = L_prob, unscaled
    assert out["loss_thresh"].item() == 0.0 and out["loss_binary"].item() == 0.0
    out["loss"].backward()
    used = p.grad[0, 0] != 0  # exactly the 2 positives and the 6 kept negatives get a gradient
    expected_used = (gt[0, 0] > 0) | torch.isin(p.detach()[0, 0], torch.tensor(hard))
    assert torch.equal(used, expected_used) and int(used.sum()) == 8


def test_text_free_image_keeps_min_negatives():
    """An image without text keeps its 10 hardest negatives (min_negatives), not 3 * 0."""
    p = torch.linspace(0.01, 0.99, 25).view(1, 1, 5, 5)
    out = DBLoss()({"binary": p}, torch.zeros(1, 1, 5, 5), torch.ones(1, 5, 5))
    hardest = (-torch.log(1 - p.flatten().double())).sort(descending=True).values[:10]
    assert out["loss"].item() == pytest.approx((hardest.sum() / (10 + 1e-6)).item(), rel=1e-5)
    none = DBLoss(min_negatives=0)({"binary": p}, torch.zeros(1, 1, 5, 5), torch.ones(1, 5, 5))
    assert none["loss"].item() == 0.0


def test_ohem_mindocr_keeps_every_negative_tied_with_the_kth():
    """loss.ohem: mindocr, as MindOCR 0.5's BalancedBCELoss: 2 positives (P 0.8) ask for 3 * 2 = 6 negatives,
    raised to MindOCR's 10; negatives: 4 at P 0.9, 8 at P 0.5 (tied), 18 at P 0.1. The 10th largest loss is
    ln 2, so all 12 negatives at or above it are summed, and the sum is still divided by 2 + 10. textdet's
    default keeps exactly 6: the four 0.9s and the first two 0.5s."""
    p = torch.full((1, 1, 4, 8), 0.1)
    gt = torch.zeros(1, 1, 4, 8)
    gt[0, 0, 0, :2] = 1.0
    p[0, 0, 0, :2] = 0.8
    p[0, 0, 0, 2:6] = 0.9
    p[0, 0, 1, :8] = 0.5
    mask = torch.ones(1, 4, 8)
    positives = -2 * math.log(0.8)
    mindocr = DBLoss(ohem="mindocr")({"binary": p}, gt, mask)["loss"].item()
    expected = (positives - 4 * math.log(0.1) - 8 * math.log(0.5)) / (2 + 10 + 1e-6)
    assert mindocr == pytest.approx(expected, rel=1e-6)
    # MindOCR computes the BCE from P: logits given next to it (zeros here, P = 0.5) change nothing.
    with_logits = {"binary": p, "binary_logits": torch.zeros_like(p)}
    assert DBLoss(ohem="mindocr")(with_logits, gt, mask)["loss"].item() == mindocr
    topk = DBLoss()({"binary": p}, gt, mask)["loss"].item()
    exactly_six = (positives - 4 * math.log(0.1) - 2 * math.log(0.5)) / (2 + 6 + 1e-6)
    assert topk == pytest.approx(exactly_six, rel=1e-6)
    with pytest.raises(ValueError, match=r"ohem must be one of \['topk', 'mindocr'\], got 'sort'"):
        DBLoss(ohem="sort")


def test_topk_mask_keeps_exactly_k_with_ties():
    """Row 0: five equal values, k = 3 -> the first 3; row 1: k = 0 -> none, k = 2 -> 4 and 3 (5 is not valid);
    row 2: one entry above the tie, k = 3 -> it and the first two of the three 2s. k = all valid keeps every
    valid entry; invalid entries are never picked."""
    values = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0], [5.0, 4.0, 3.0, 2.0, 1.0, 0.0],
                           [2.0, 3.0, 0.0, 2.0, 2.0, 0.0]])
    valid = torch.tensor([[True, True, True, True, True, True], [False, True, True, True, True, True],
                          [True, True, True, True, True, False]])
    keep = topk_mask(values, valid, torch.tensor([3, 0, 3]))
    assert keep.int().tolist() == [[1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 0, 1, 0, 0]]
    keep = topk_mask(values, valid, torch.tensor([6, 2, 5]))
    assert keep.int().tolist() == [[1, 1, 1, 1, 1, 1], [0, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(2, 9), st.integers(0, 2**31 - 1), st.booleans())
def test_ohem_matches_a_sort_reference(n: int, size: int, seed: int, coarse: bool):
    """The sort-free selection gives the same loss as sorting each image's negative losses."""
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(n, 1, size, size, generator=g)
    if coarse:  # many exact ties
        p = (p * 4).round() / 4 * 0.98 + 0.01
    gt = (torch.rand(n, 1, size, size, generator=g) > 0.8).float()
    mask = (torch.rand(n, size, size, generator=g) > 0.2).float()
    got = DBLoss()({"binary": p}, gt, mask)["loss"].double()
    loss = torch.nn.functional.binary_cross_entropy(p, gt, reduction="none").double()[:, 0]
    pos, neg = gt[:, 0] * mask, (1 - gt[:, 0]) * mask
    num, den = (loss * pos).sum(), pos.sum().double()
    for i in range(n):
        negs = loss[i][neg[i] > 0].sort(descending=True).values
        npos = int(pos[i].sum())
        k = min(len(negs), 3 * npos if npos else 10)
        num, den = num + negs[:k].sum(), den + k
    assert got.item() == pytest.approx((num / (den + 1e-6)).item(), rel=1e-5, abs=1e-7)


def test_dice_replacement():
    """bce_replace='diceloss': P = 0.5 * gt -> 1 - 2 * 0.5 S / (0.5 S + S) = 1/3."""
    t = _targets(n=1)
    out = DBLoss(bce_replace="diceloss")({"binary": 0.5 * t["binary_map"]}, **t)
    assert out["loss_prob"].item() == pytest.approx(1 / 3, rel=1e-5)


def test_gap_penalty_on_the_band_outside_the_kernel():
    """Pixels (0,0), (0,1): in thresh_mask, outside the kernel -> softplus(0) + softplus(ln 3) = ln 2 + ln 4,
    over 2 pixels: 1.5 ln 2. (1,0) is outside thresh_mask, (1,1) inside the kernel: neither counts."""
    logits = torch.tensor([[[[0.0, math.log(3.0)], [-math.log(3.0), 5.0]]]], requires_grad=True)
    targets = {"binary_map": torch.tensor([[[[0.0, 0.0], [0.0, 1.0]]]]), "mask": torch.ones(1, 2, 2),
               "thresh_mask": torch.tensor([[[1.0, 1.0], [0.0, 1.0]]])}
    preds = {"binary": torch.sigmoid(logits), "binary_logits": logits}
    dice_only = DBLoss(bce_replace="diceloss")(preds, **targets)["loss_prob"]
    out = DBLoss(bce_replace="diceloss", gap_weight=0.1)(preds, **targets)
    assert (out["loss_prob"] - dice_only).item() == pytest.approx(0.1 * 1.5 * math.log(2.0), rel=1e-5)
    assert out["loss"].item() == pytest.approx(out["loss_prob"].item())


def test_gap_penalty_keeps_its_gradient_where_p_is_saturated():
    """At logit 20 (P = 1 - 2e-9) Dice on P has no slope left; the penalty's slope there is 0.1 *
    sigmoid(20) / 1 pixel of band."""
    logits = torch.full((1, 1, 1, 2), 20.0, requires_grad=True)
    targets = {"binary_map": torch.tensor([[[[0.0, 1.0]]]]), "mask": torch.ones(1, 1, 2),
               "thresh_mask": torch.tensor([[[1.0, 0.0]]])}
    preds = {"binary": torch.sigmoid(logits), "binary_logits": logits}
    DBLoss(bce_replace="diceloss", gap_weight=0.1)(preds, **targets)["loss"].backward()
    assert logits.grad[0, 0, 0, 0].item() == pytest.approx(0.1, rel=1e-4)


def test_gap_penalty_needs_the_band_and_the_logits():
    logits = torch.zeros(1, 1, 4, 4)
    gt, mask = torch.zeros(1, 1, 4, 4), torch.ones(1, 4, 4)
    loss = DBLoss(bce_replace="diceloss", gap_weight=0.1)
    with pytest.raises(ValueError, match="BorderMap"):
        loss({"binary": torch.sigmoid(logits), "binary_logits": logits}, gt, mask)
    with pytest.raises(ValueError, match="binary_logits"):
        loss({"binary": torch.sigmoid(logits)}, gt, mask, thresh_mask=torch.ones(1, 4, 4))
    with pytest.raises(ValueError, match="gap_weight"):
        DBLoss(gap_weight=-1)


def test_full_loss_combines_the_terms():
    """loss = 5 * L_prob + 10 * L_thresh + L_binary."""
    t = _targets()
    g = torch.Generator().manual_seed(1)
    preds = {k: torch.rand(2, 1, 16, 16, generator=g) for k in ("binary", "thresh", "thresh_binary")}
    out = DBLoss()(preds, **t)
    combined = 5 * out["loss_prob"] + 10 * out["loss_thresh"] + out["loss_binary"]
    assert out["loss"].item() == pytest.approx(combined.item(), rel=1e-6)
    l1 = ((preds["thresh"][:, 0] - t["thresh_map"]).abs() * t["thresh_mask"]).sum() / (t["thresh_mask"].sum() + 1e-6)
    assert out["loss_thresh"].item() == pytest.approx(l1.item(), rel=1e-6)


def test_fp32_under_bf16_autocast_and_grads_flow():
    t = _targets()
    g = torch.Generator().manual_seed(2)
    leaves = {
        k: torch.rand(2, 1, 16, 16, generator=g, requires_grad=True) for k in ("binary", "thresh", "thresh_binary")
    }
    with torch.autocast("cpu", dtype=torch.bfloat16):
        preds = {k: v.to(torch.bfloat16) for k, v in leaves.items()}
        out = DBLoss()(preds, **t)
    assert all(v.dtype == torch.float32 for v in out.values())
    out["loss"].backward()
    for k, v in leaves.items():
        assert v.grad is not None and torch.isfinite(v.grad).all() and v.grad.abs().sum() > 0, k


def test_bad_inputs_and_build_loss():
    with pytest.raises(ValueError, match="bce_replace"):
        DBLoss(bce_replace="focal")
    with pytest.raises(ValueError, match=r"\(N,1,H,W\)"):
        DBLoss()({"binary": torch.rand(1, 2, 4, 4)}, torch.zeros(1, 1, 4, 4), torch.ones(1, 4, 4))
    with pytest.raises(ValueError, match="thresh_map"):
        DBLoss()(
            {"binary": torch.rand(1, 1, 4, 4), "thresh": torch.rand(1, 1, 4, 4)},
            torch.zeros(1, 1, 4, 4),
            torch.ones(1, 4, 4),
        )
    assert LOSSES == {"DBLoss": DBLoss}
    assert build_component(LOSSES, "DBLoss", {"bce_scale": 1}, "loss", "loss").bce_scale == 1.0
    with pytest.raises(ConfigError, match="DBLoss"):
        build_component(LOSSES, "DiceLoss", {}, "loss", "loss")
    with pytest.raises(ConfigError, match="alpha"):
        build_component(LOSSES, "DBLoss", {"alpha": 1}, "loss", "loss")
    with pytest.raises(ConfigError, match="bce_replace"):
        build_component(LOSSES, "DBLoss", {"bce_replace": "x"}, "loss", "loss")
