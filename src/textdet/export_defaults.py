"""ONNX export defaults: the opset and the traced input size.

Apart from ``textdet.export``, which imports torch: ``textdet export --help`` shows these values, and the CLI
must answer without importing torch (tests/test_architecture.py: test_cli_does_not_import_torch)."""

DEFAULT_OPSET = 17
DEFAULT_EXPORT_HW = (640, 640)  # traced input when the config's DetResize has no target_size
