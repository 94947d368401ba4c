"""DBNet models: backbones (ResNet, MobileNetV3, PPLCNetV3, PPLCNetV4), necks (DBFPN +ASF, RSEFPN, RepLKFPN),
DBHead, ``build_model``."""

from textdet.models.dbnet import BACKBONES, HEADS, NECKS, DBNet, build_model, count_parameters
from textdet.models.fpn import DBFPN
from textdet.models.head import DBHead
from textdet.models.mobilenetv3 import det_mobilenet_v3
from textdet.models.resnet import DetResNet, det_resnet18, det_resnet50
from textdet.models.weights import load_model_weights, read_state_dict, strip_wrappers

__all__ = ["BACKBONES", "HEADS", "NECKS", "DBFPN", "DBHead", "DBNet", "DetResNet", "build_model", "count_parameters",
           "det_mobilenet_v3", "det_resnet18", "det_resnet50", "load_model_weights", "read_state_dict",
           "strip_wrappers"]
