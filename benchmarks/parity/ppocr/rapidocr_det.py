"""RapidOCR's text detector with a det model of your choice, over a split's photos: its boxes as a label file,
for `textdet metric` to score. It checks that a textdet export (fp32 or int8) drops into RapidOCR as
PP-OCR's own det model does, and what it scores there. Runs in a Python that has RapidOCR (it imports nothing
from textdet):

```
python -m venv rapid && rapid/bin/pip install rapidocr-onnxruntime==1.4.4
rapid/bin/python benchmarks/parity/ppocr/rapidocr_det.py --model MODEL.onnx --data IC15 --out pred_gt.txt
textdet metric --gt IC15/test_gt.txt --pred pred_gt.txt
```
``--data``: MindOCR's layout (``val/images`` and ``test_gt.txt``, whose photos are read, in its order).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import cv2
from rapidocr_onnxruntime import RapidOCR


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the det ONNX model RapidOCR is given (det_model_path)")
    parser.add_argument("--data", required=True, help="a data set in MindOCR's layout")
    parser.add_argument("--out", required=True, help="the label file of RapidOCR's boxes to write")
    args = parser.parse_args()
    engine = RapidOCR(det_model_path=args.model)
    with open(os.path.join(args.data, "test_gt.txt"), encoding="utf-8") as f:
        names = [line.split("\t", 1)[0] for line in f if line.strip()]
    lines, start = [], time.perf_counter()
    for name in names:
        image = cv2.imread(os.path.join(args.data, "val", "images", name))
        boxes, _ = engine.text_det(image)  # the detector alone: RapidOCR's preprocessing and post-processing
        boxes = [] if boxes is None else boxes
        regions = [{"transcription": "", "points": [[float(x), float(y)] for x, y in box]} for box in boxes]
        lines.append(f"{name}\t{json.dumps(regions)}\n")
    seconds = time.perf_counter() - start
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(lines)
    print(f"RapidOCR det ({os.path.basename(args.model)}): {len(names)} photos, {len(names) / seconds:.2f} img/s; "
          f"wrote {args.out}")


if __name__ == "__main__":
    main()
