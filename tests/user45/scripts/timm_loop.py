"""A timm-style training loop (timm's model, optimizer, scheduler and label-smoothing loss) over dataio shards,
written without any thought of CPU tiers: ``timm_loop.py SHARDS OUT.json``. Writes the sha256 of every batch
(images and labels) and the losses, to compare runs."""

import hashlib
import json
import sys

import torch
import timm
from timm.loss import LabelSmoothingCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2

import dataio

torch.manual_seed(0)
loader = dataio.ImageLoader(sys.argv[1], batch_size=8, image_size=64, train=True, seed=0, normalize=True,
                            num_workers=2)
model = timm.create_model("resnet10t", num_classes=len(loader.dataset.classes))
optimizer = create_optimizer_v2(model, opt="sgd", lr=0.01, weight_decay=1e-4)
scheduler, _ = create_scheduler_v2(optimizer, sched="cosine", num_epochs=2)
loss_fn = LabelSmoothingCrossEntropy(0.1)
digests, losses = [], []
for epoch in range(2):
    loader.set_epoch(epoch)
    for step, (images, labels) in enumerate(loader):
        digests.append(hashlib.sha256(images.contiguous().numpy().tobytes() + labels.numpy().tobytes()).hexdigest())
        loss = loss_fn(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(round(loss.item(), 6))
        if step == 1:
            break
    scheduler.step(epoch + 1)
with open(sys.argv[2], "w") as out:
    json.dump({"digests": digests, "losses": losses}, out)
