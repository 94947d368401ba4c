"""DBNet loss: balanced BCE with per-image OHEM on P, masked L1 on T, Dice on B (MindOCR's DBLoss).
Every term runs in fp32 with autocast off (DB losses in fp16 diverge, PaddleOCR #10874); BCE uses P's logits
when given. No host sync (no ``.item()``, no data-dependent shapes), so it fits a compiled/CUDA-graph step."""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_BCE_REPLACE = ("bceloss", "diceloss")
# Which hard negatives OHEM keeps: "topk" exactly k, ties in pixel order (textdet); "mindocr" every negative
# tied with the k-th too, at least 10 an image, still divided by k, BCE computed from P and not from its
# logits (MindOCR 0.5's BalancedBCELoss).
_OHEM = ("topk", "mindocr")
_MINDOCR_MIN_NEGATIVES = 10
# OHEM: a float32 >= 0 orders like its int32 bit pattern, so bisecting over bit patterns finds the
# k-th largest value exactly in 31 halvings of [0, 0x7F800001) (the upper end is just above +inf).
_BITS_HI = 0x7F800001
_BISECT_STEPS = 31


def _as_nhw(x: Tensor, name: str, shape: torch.Size) -> Tensor:
    """Return ``x`` as fp32, or fp64 if it is (N, H, W); accepts (N, 1, H, W) or (N, H, W) matching ``shape``."""
    if not isinstance(x, Tensor):
        raise TypeError(f"DBLoss: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 4 and x.shape[1] == 1:
        x = x[:, 0]
    if x.shape != shape:
        raise ValueError(f"DBLoss: {name} must have shape (N,1,H,W) or (N,H,W) = {tuple(shape)}, got {tuple(x.shape)}")
    return x.to(torch.promote_types(x.dtype, torch.float32))  # float64 stays: the parity checks' exact reference


def dice_loss(pred: Tensor, gt: Tensor, mask: Tensor, eps: float = 1e-6) -> Tensor:
    """Batch-global Dice ``1 - 2 sum(p g) / (sum p + sum g + eps)``, p and g times ``mask``; all fp32 (N, H, W)."""
    p, g = pred * mask, gt * mask
    return 1.0 - 2.0 * (p * g).sum() / (p.sum() + g.sum() + eps)


def masked_l1_loss(pred: Tensor, gt: Tensor, mask: Tensor, eps: float = 1e-6) -> Tensor:
    """Batch-global ``sum(|pred - gt| * mask) / (sum(mask) + eps)``; all fp32 (N, H, W)."""
    return ((pred - gt).abs() * mask).sum() / (mask.sum() + eps)


def gap_penalty(logits: Tensor, ring: Tensor, eps: float = 1e-6) -> Tensor:
    """BCE towards 0 (``softplus(z)``) averaged over the ``ring`` pixels, taken from P's logits ``z``.

    Why logits: an imported line detector is saturated where it is wrong (P > 0.99 in the gaps between
    words), where Dice on P = sigmoid(z) has almost no gradient; softplus(z) keeps a slope of about 1 there.
    """
    return (F.softplus(logits) * ring).sum() / (ring.sum() + eps)


def _float_bits(values: Tensor, valid: Tensor) -> Tensor:
    """int32 bit patterns of ``values`` (>= 0), -1 where not ``valid``: they order as the floats do."""
    bits = values.detach().float().abs().contiguous().view(torch.int32)  # abs() turns -0.0 into +0.0
    return torch.where(valid, bits, torch.full_like(bits, -1))  # never counted: every threshold is >= 0


def _kth_largest_bits(bits: Tensor, k: Tensor) -> Tensor:
    """(N, 1) int32: the bit pattern of each row's ``k[i]``-th largest entry (``k``: (N, 1) int32 >= 1), by
    bisection: no sort and no host sync."""
    lo = torch.zeros_like(k)  # invariant: count(bits >= lo) >= k
    hi = torch.full_like(lo, _BITS_HI)  # invariant: count(bits >= hi) < k (when k >= 1)
    for _ in range(_BISECT_STEPS):
        mid = lo + (hi - lo) // 2
        enough = (bits >= mid).sum(dim=1, keepdim=True, dtype=torch.int32) >= k
        lo = torch.where(enough, mid, lo)
        hi = torch.where(enough, hi, mid)
    return lo


def topk_mask(values: Tensor, valid: Tensor, k: Tensor) -> Tensor:
    """bool (N, M): exactly ``k[i]`` of the largest ``valid`` entries of each row, ties by index.

    values: float (N, M) >= 0; valid: bool (N, M); k: int (N,), at most each row's valid count (DBLoss's
    negative counts are). Two bisections, no sort and no host sync: over float32 bit patterns for the k-th
    largest value, then over positions for how many of the entries tied at it come first. Index order is
    a fixed choice (MindOCR 0.5 keeps every tied entry instead: ``at_least_kth_mask``), made without a
    prefix sum, which torch 2.11's Inductor could not compile on CUDA
    (docs/decisions/ohem-by-bisection.md)."""
    bits = _float_bits(values, valid)
    k = k.to(torch.int32).unsqueeze(1)  # int32 counts: summing bools into int32 is ~2x faster than int64
    lo = _kth_largest_bits(bits, k)
    above = bits > lo
    tie = bits == lo
    still_needed = k - above.sum(dim=1, keepdim=True, dtype=torch.int32)
    # The smallest cut with count(tie before cut) >= still_needed; the tied entries before it are kept.
    width = bits.shape[1]
    position = torch.arange(width, device=bits.device, dtype=torch.int32).unsqueeze(0)
    cut_lo = torch.zeros_like(k)  # count(tie before cut_lo) < still_needed, or cut_lo = 0
    cut_hi = torch.full_like(k, width)  # count(tie before cut_hi) = all ties >= still_needed
    for _ in range(width.bit_length()):
        mid = cut_lo + (cut_hi - cut_lo) // 2
        enough = (tie & (position < mid)).sum(dim=1, keepdim=True, dtype=torch.int32) >= still_needed
        cut_lo = torch.where(enough, cut_lo, mid)
        cut_hi = torch.where(enough, mid, cut_hi)
    return above | (tie & (position < cut_hi) & (still_needed > 0))


def at_least_kth_mask(values: Tensor, valid: Tensor, k: Tensor) -> Tensor:
    """bool (N, M): every ``valid`` entry >= the ``k[i]``-th largest of its row, so all entries tied with
    it (MindOCR 0.5's BalancedBCELoss: sort, keep what is >= the k-th value). Nothing where ``k[i]`` is 0."""
    bits = _float_bits(values, valid)
    k = k.to(torch.int32).unsqueeze(1)
    return (bits >= _kth_largest_bits(bits, k)) & (k > 0)


class DBLoss(nn.Module):
    """``L = bce_scale * L_prob(P) + l1_scale * L_thresh(T) + L_binary(B)`` (``L_prob`` alone when only P is given):
    balanced BCE with OHEM (or Dice), masked L1, Dice; formulas in docs/decisions/ohem-by-bisection.md, fp32
    from logits: docs/decisions/fp32-loss-head.md. Unscaled terms are returned next to ``"loss"``.

    ``gap_weight`` > 0 adds ``gap_weight * gap_penalty`` to ``L_prob``: P pushed to 0 on the border band
    around each word (``thresh_mask``) outside its kernel, the gaps a line detector must learn to leave open
    when it is fine-tuned on word labels (docs/decisions/gap-penalty.md)."""

    def __init__(self, eps: float = 1e-6, l1_scale: float = 10, bce_scale: float = 5, bce_replace: str = "bceloss",
                 negative_ratio: float = 3, min_negatives: int = 10, ohem: str = "topk",
                 gap_weight: float = 0.0) -> None:
        super().__init__()
        if bce_replace not in _BCE_REPLACE:
            raise ValueError(f"DBLoss: bce_replace must be one of {list(_BCE_REPLACE)}, got {bce_replace!r}")
        if ohem not in _OHEM:
            raise ValueError(f"DBLoss: ohem must be one of {list(_OHEM)}, got {ohem!r}")
        if negative_ratio < 0 or min_negatives < 0:
            raise ValueError(f"DBLoss: negative_ratio and min_negatives must be >= 0, got {negative_ratio}, "
                             f"{min_negatives}")
        if gap_weight < 0:
            raise ValueError(f"DBLoss: gap_weight must be >= 0, got {gap_weight}")
        self.eps = float(eps)
        self.l1_scale = float(l1_scale)
        self.bce_scale = float(bce_scale)
        self.negative_ratio = float(negative_ratio)
        self.min_negatives = int(min_negatives)
        self.bce_replace = bce_replace
        self.ohem = ohem
        self.gap_weight = float(gap_weight)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in inspect.signature(DBLoss).parameters)

    def balanced_bce(self, pred: Tensor, gt: Tensor, mask: Tensor, logits: Tensor | None = None) -> Tensor:
        """Balanced BCE with per-image OHEM; pred, gt, mask fp32 (N, H, W), pred in [0, 1]; logits of pred."""
        n = pred.shape[0]
        pos, neg = gt * mask, (1.0 - gt) * mask
        if logits is not None:
            loss = F.binary_cross_entropy_with_logits(logits, gt, reduction="none")
        else:  # clamps log() at -100: P exactly 0 or 1 stays finite, but its gradient is lost
            loss = F.binary_cross_entropy(pred, gt, reduction="none")
        npos = pos.sum(dim=(1, 2))
        valid = (neg > 0).view(n, -1)
        navail = valid.sum(dim=1)
        by_ratio = torch.floor(self.negative_ratio * npos).to(torch.int64)
        neg_loss = (loss * neg).view(n, -1)
        if self.ohem == "mindocr":
            # MindOCR sorts every pixel's negative loss (0 off the negatives) and keeps what is >= the k-th.
            nneg = torch.clamp(torch.minimum(navail, by_ratio), min=_MINDOCR_MIN_NEGATIVES)
            keep = at_least_kth_mask(neg_loss, torch.ones_like(valid), nneg)
        else:
            floor = torch.full_like(navail, self.min_negatives)
            nneg = torch.minimum(navail, torch.where(npos > 0, by_ratio, floor))
            keep = topk_mask(loss.view(n, -1), valid, nneg)
        neg_sum = (neg_loss * keep).sum()
        return ((loss * pos).sum() + neg_sum) / (npos.sum() + nneg.sum().float() + self.eps)

    def _gap(self, preds: Mapping[str, Tensor], gt: Tensor, mask: Tensor, thresh_mask: Tensor | None,
             shape: torch.Size) -> Tensor:
        """``gap_penalty`` on the border band outside the kernels and the ignored regions."""
        if thresh_mask is None:
            raise ValueError("DBLoss: gap_weight > 0 needs thresh_mask: add a BorderMap step to "
                             "train.dataset.transform_pipeline and thresh_map, thresh_mask to output_columns")
        if "binary_logits" not in preds:
            raise ValueError("DBLoss: gap_weight > 0 needs preds['binary_logits'] (DBHead gives them in "
                             "training)")
        logits = _as_nhw(preds["binary_logits"], "preds['binary_logits']", shape)
        ring = _as_nhw(thresh_mask, "thresh_mask", shape) * (1.0 - gt) * mask
        return gap_penalty(logits, ring, self.eps)

    def forward(self, preds: Mapping[str, Tensor] | Tensor, binary_map: Tensor, mask: Tensor,
                thresh_map: Tensor | None = None, thresh_mask: Tensor | None = None) -> dict[str, Tensor]:
        """Compute the DB loss: ``{"loss", "loss_prob", "loss_thresh", "loss_binary"}``, scalar fp32 tensors.
        ``preds``: ``{"binary": P, "thresh": T, "thresh_binary": B}`` (T, B optional; optional ``"binary_logits"``),
        probabilities (N, 1, H, W), or a bare tensor P. ``binary_map`` (N, [1,] H, W) 0/1; ``mask`` (N, H, W) 0 where
        ignored; ``thresh_map``/``thresh_mask`` (N, H, W) are needed when T is given, ``thresh_mask`` and
        ``"binary_logits"`` when ``gap_weight`` > 0."""
        if isinstance(preds, Tensor):
            preds = {"binary": preds}
        if "binary" not in preds:
            raise ValueError(f"DBLoss: preds must contain 'binary', got keys {sorted(preds)}")
        p_raw = preds["binary"]
        if p_raw.dim() != 4 or p_raw.shape[1] != 1:
            raise ValueError(f"DBLoss: preds['binary'] must be (N,1,H,W), got {tuple(p_raw.shape)}")
        shape = torch.Size((p_raw.shape[0], p_raw.shape[2], p_raw.shape[3]))
        with torch.autocast(device_type=p_raw.device.type, enabled=False):
            prob = _as_nhw(p_raw, "preds['binary']", shape)
            gt = _as_nhw(binary_map, "binary_map", shape)
            m = _as_nhw(mask, "mask", shape)
            if self.bce_replace == "diceloss":
                loss_prob = dice_loss(prob, gt, m, self.eps)
            else:
                # MindOCR's rule takes the BCE from P, whose tied values are the ones MindOCR sees.
                logits = None if self.ohem == "mindocr" else preds.get("binary_logits")
                logits = None if logits is None else _as_nhw(logits, "preds['binary_logits']", shape)
                loss_prob = self.balanced_bce(prob, gt, m, logits)
            if self.gap_weight > 0:
                loss_prob = loss_prob + self.gap_weight * self._gap(preds, gt, m, thresh_mask, shape)
            zero = loss_prob.new_zeros(())
            loss_thresh, loss_binary = zero, zero
            if "thresh" not in preds and "thresh_binary" not in preds:
                return {"loss": loss_prob, "loss_prob": loss_prob, "loss_thresh": zero, "loss_binary": zero}
            if "thresh" in preds:
                if thresh_map is None or thresh_mask is None:
                    raise ValueError("DBLoss: preds has 'thresh' but thresh_map / thresh_mask were not given")
                t = _as_nhw(preds["thresh"], "preds['thresh']", shape)
                t_gt = _as_nhw(thresh_map, "thresh_map", shape)
                t_mask = _as_nhw(thresh_mask, "thresh_mask", shape)
                loss_thresh = masked_l1_loss(t, t_gt, t_mask, self.eps)
            if "thresh_binary" in preds:
                b = _as_nhw(preds["thresh_binary"], "preds['thresh_binary']", shape)
                loss_binary = dice_loss(b, gt, m, self.eps)
            loss = self.bce_scale * loss_prob + self.l1_scale * loss_thresh + loss_binary
        return {"loss": loss, "loss_prob": loss_prob, "loss_thresh": loss_thresh, "loss_binary": loss_binary}
