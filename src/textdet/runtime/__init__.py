"""What training and inference share: checkpoints, mixed precision, feeding the device, shape buckets, the
ONNX Runtime model and evaluation. Nothing here reads the config: ``textdet.build`` turns config sections
into these objects."""
