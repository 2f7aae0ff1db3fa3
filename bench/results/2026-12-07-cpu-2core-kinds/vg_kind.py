"""One loader pass of a kind (0 passes: set-up only), for callgrind: python vg_kind.py KIND PASSES."""
import sys
import dataio
kind, passes = sys.argv[1], int(sys.argv[2])
faces = hasattr(dataio, "PairLoader")
if kind in ("train", "eval"):
    loader = dataio.ImageLoader("shards-img", batch_size=64, image_size=160, train=kind == "train", num_workers=1, seed=0)
elif kind == "pairs":
    make = dataio.PairLoader if faces else dataio.ImageLoader
    loader = make("pairs", batch_size=64, image_size=160, num_workers=1, seed=0, normalize=True,
                  captions=dataio.CaptionConfig(max_length=77, pad_to_max_length=True))
elif kind == "detection":
    make = dataio.DetectionLoader if faces else dataio.ImageLoader
    loader = make("coco-shards", batch_size=16, image_size=320, num_workers=1, seed=0, normalize=True,
                  targets=dataio.DetectionConfig(masks=False))
else:  # text modes
    cases = {"bucket": dict(mode="bucket", batch_size=32), "budget": dict(mode="budget", max_tokens=8192),
             "pack": dict(mode="pack", block_size=1024, batch_size=16), "fixed": dict(mode="fixed", batch_size=32)}
    loader = dataio.TextLoader("shards-txt", seed=0, **cases[kind])
for _ in range(passes):
    loader.set_epoch(0)
    for b in loader:
        pass
