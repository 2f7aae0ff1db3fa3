import sys
import dataio
mode, passes = sys.argv[1], int(sys.argv[2])
loader = dataio.ImageLoader("./shards-img", batch_size=64, image_size=160, train=(mode == "train"),
                            num_workers=1, seed=0, device="cpu")
for _ in range(passes):
    loader.set_epoch(0)
    for b in loader:
        pass
