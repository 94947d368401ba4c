"""DBNet models: backbones (ResNet, MobileNetV3), DBFPN (+ASF), DBHead, DBNet and ``build_model``."""

from textdet.models.dbnet import BACKBONES, HEADS, NECKS, DBNet, build_model, check_images, count_parameters
from textdet.models.fpn import DBFPN, AdaptiveScaleFusion
from textdet.models.head import DBHead
from textdet.models.mobilenetv3 import DetMobileNetV3, det_mobilenet_v3
from textdet.models.resnet import DetResNet, det_resnet18, det_resnet34, det_resnet50
from textdet.models.weights import LoadReport, hub_checkpoint_dir, load_model_weights, read_state_dict, strip_wrappers

__all__ = [
    "BACKBONES", "HEADS", "NECKS", "AdaptiveScaleFusion", "DBFPN", "DBHead", "DBNet", "DetMobileNetV3", "DetResNet",
    "LoadReport", "build_model", "check_images", "count_parameters", "det_mobilenet_v3", "det_resnet18", "det_resnet34",
    "det_resnet50", "hub_checkpoint_dir", "load_model_weights", "read_state_dict", "strip_wrappers"
]
