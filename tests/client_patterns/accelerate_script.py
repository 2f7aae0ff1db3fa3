"""An Accelerate script (``torchrun`` x2, CPU) in the shape of Hugging Face's ``cv_example.py``, its loaders swapped to
``dataio.DataLoader``; used by tests/client_patterns/test_user_patterns.py, not a test module.

``torchrun --nproc-per-node 2 accelerate_script.py TRAIN VAL OUT``: 2 epochs of training, an evaluation with
``gather_for_metrics`` after each; rank 0 writes ``OUT/result.json`` (the samples gathered per evaluation, seconds).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
from accelerate import Accelerator

import dataio


def main() -> None:
    train, val, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    accelerator = Accelerator(cpu=True)
    train_loader = dataio.DataLoader(train, batch_size=4, shuffle=True, num_workers=1, image_size=16)
    eval_loader = dataio.DataLoader(val, batch_size=4, num_workers=1, image_size=16)
    model = torch.nn.Linear(3 * 16 * 16, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer, train_loader, eval_loader = accelerator.prepare(model, optimizer, train_loader, eval_loader)
    gathered, start = [], time.perf_counter()
    for epoch in range(2):
        train_loader.set_epoch(epoch)
        model.train()
        for images, labels in train_loader:
            loss = torch.nn.functional.cross_entropy(model(images.flatten(1)), labels)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        model.eval()
        seen = 0
        for images, labels in eval_loader:
            with torch.no_grad():
                predictions = model(images.flatten(1)).argmax(-1)
            predictions, references = accelerator.gather_for_metrics((predictions, labels))
            seen += len(references)
        gathered.append(seen)
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps({"gathered": gathered, "seconds": time.perf_counter() - start}))
    accelerator.wait_for_everyone()
    os._exit(0)


if __name__ == "__main__":
    main()
