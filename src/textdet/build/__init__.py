"""Config sections -> objects: the one layer that reads the ``Config``. ``sections`` needs no torch (start-up
validation runs before ``import torch``); ``parts`` builds what training and inference share (model,
weights, data, evaluation, the Detector); ``training`` builds a Trainer and its watch."""
