"""Batched augmentation on the training device (RandAugment, MixUp/CutMix, resizing schedules).

The loader hands uint8 batches to the device; the ops of this package run
there, batched, with per-sample parameters (issue 3).
"""
