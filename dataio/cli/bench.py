"""``dataio bench images|augment|text|sampler|pairs|detection|views``: the benchmarks, importing ``bench/`` as they
run."""

from __future__ import annotations

import argparse
from pathlib import Path

from dataio.cli.flags import add_storage, default_workers, positive, source, storage_options_of
from dataio.formats.jpeg.cpu_tier import TIERS

def add(commands: argparse._SubParsersAction) -> None:
    """The ``bench`` command and its kinds."""
    bench = commands.add_parser("bench", help="throughput benchmarks")
    bench_kinds = bench.add_subparsers(dest="kind", required=True)
    bench_images = bench_kinds.add_parser("images", help="image loaders on the same folder")
    bench_images.add_argument("src", type=Path, help="an ImageNet-layout folder, read as it is by the standard "
                              "recipe and converted (unless --shards) for the others")
    bench_images.add_argument("--shards", type=source, help="an existing conversion of SRC (a folder, or an "
                              "s3://... URL: the remote row is timed beside the local one; default: SRC is "
                              "converted into a temporary folder first)")
    add_storage(bench_images)
    bench_images.add_argument("--out", type=Path, default=Path("bench/results"),
                              help="folder for images.json and images.png")
    bench_images.add_argument("--batch-size", type=positive, default=256, help="images per batch")
    bench_images.add_argument("--image-size", type=positive, default=224,
                              help="side of the crops (train and eval), in pixels")
    bench_images.add_argument("--workers", type=positive, help="DataLoader workers / decode threads of every "
                              "loader (default: DATAIO_NUM_WORKERS, else all cores)")
    bench_images.add_argument("--epochs", type=positive, default=3, help="timed epochs per loader (the median counts)")
    bench_images.add_argument("--warmup", type=int, default=1, help="untimed epochs per loader before the timed ones")
    bench_images.add_argument("--rounds", type=positive, default=1,
                              help="run the whole loader sequence this many times (medians over all rounds)")
    bench_images.add_argument("--loaders", help="comma-separated (default: standard,webdataset,shard_dataset,dali_cpu,"
                              "dali_cpu_plain,dataio,dataio_unchecked,standard_eval,dataio_eval,dataio_mixture, plus "
                              "dataio_dali_gpu on a GPU machine, the DALI rows where DALI is installed; dali_cpu_plain "
                              "is DALI over a "
                              "copy packed without restart markers; with --photo-classes: standard,dataio,"
                              "standard_eval,dataio_eval)")
    bench_images.add_argument("--photo-classes", help="comma-separated photo classes (small, imagenet, camera): SRC is "
                              "then a folder holding SRC/<class> for each, generated if absent, and the loaders run "
                              "on each class (default: none, SRC is one folder of images)")
    bench_images.add_argument("--photo-images", type=positive, help="photos generated per class when SRC/<class> is "
                              "absent (default: 1024, camera 256)")
    bench_images.add_argument("--limit-images", type=positive, default=1000,
                              help="images the single-thread stage limits decode (default: 1000)")
    bench_images.add_argument("--cpu-tier", choices=TIERS, help="the crop-resize's kernels: run this tier, capped at "
                              "the CPU's highest, to measure it beside the others on one machine (default: "
                              "DATAIO_CPU_TIER, else the CPU's highest)")

    bench_augment = bench_kinds.add_parser("augment", help="device augmentation against kornia and a PIL loop")
    bench_augment.add_argument("--out", type=Path, default=Path("bench/results"),
                               help="folder for augment-DEVICE.json and .png")
    bench_augment.add_argument("--device", help="cpu or cuda (default: cuda when present)")
    bench_augment.add_argument("--batch-size", type=positive, default=256, help="images per batch")
    bench_augment.add_argument("--image-size", type=positive, default=224, help="image side, in pixels")
    bench_augment.add_argument("--repeats", type=positive, default=7, help="timed runs of each op (the median counts)")

    bench_text = bench_kinds.add_parser("text", help="text batching against the usual on-the-fly recipe")
    bench_text.add_argument("src", type=Path, nargs="+", help=".txt/.jsonl/.parquet corpus files")
    bench_text.add_argument("--shards", type=Path, help="an existing `dataio convert text` of SRC (default: "
                            "SRC is converted into a temporary folder first)")
    bench_text.add_argument("--out", type=Path, default=Path("bench/results"), help="folder for text.json and text.png")
    bench_text.add_argument("--max-tokens", type=positive, default=16384, help="token budget per batch")
    bench_text.add_argument("--max-length", type=positive, default=1024,
                            help="longest sample in tokens (the block size when packing)")
    bench_text.add_argument("--vocab-size", type=positive, default=8192,
                            help="vocabulary of the BPE tokenizer trained on SRC (without --shards)")
    bench_text.add_argument("--workers", type=positive, help="DataLoader workers of the usual recipe (default: "
                            "DATAIO_NUM_WORKERS, else all cores)")
    bench_text.add_argument("--epochs", type=positive, default=3, help="timed epochs per loader (the median counts)")

    bench_detection = bench_kinds.add_parser("detection", help="the detection loader against the standard "
                                             "detection recipe on the same COCO images")
    bench_detection.add_argument("images", type=Path, help="the folder the JSON's file_name values are relative to")
    bench_detection.add_argument("annotations", type=Path, help="COCO instances JSON")
    bench_detection.add_argument("--shards", type=Path, help="an existing `dataio convert coco` of them (default: "
                                 "converted into a temporary folder first)")
    bench_detection.add_argument("--out", type=Path, default=Path("bench/results"),
                                 help="folder for detection.json and detection.png")
    bench_detection.add_argument("--batch-size", type=positive, default=32, help="images per batch")
    bench_detection.add_argument("--image-size", type=positive, default=300, help="side of the crops, in pixels")
    bench_detection.add_argument("--workers", type=positive, help="DataLoader workers / decode threads of both rows "
                                 "(default: DATAIO_NUM_WORKERS, else all cores)")
    bench_detection.add_argument("--epochs", type=positive, default=3, help="timed epochs per row (the median counts)")
    bench_detection.add_argument("--warmup", type=int, default=1, help="untimed epochs per row before the timed ones")
    bench_pairs = bench_kinds.add_parser("pairs", help="image-text pairs against open_clip's pipeline on img2dataset "
                                         "tars")
    bench_pairs.add_argument("src", type=Path, help="img2dataset output (tars of KEY.jpg, KEY.txt, KEY.json), indexed "
                             "in place with a trained BPE tokenizer unless it has a manifest (generated first when it "
                             "holds no tar)")
    bench_pairs.add_argument("--out", type=Path, default=Path("bench/results"), help="folder for pairs.json and pairs.png")
    bench_pairs.add_argument("--photos", type=positive, default=2048, help="captioned photos generated when SRC holds "
                             "no tar")
    bench_pairs.add_argument("--photo-class", default="imagenet", help="their size: tiny, small (~50 KB), imagenet "
                             "(~110 KB) or camera (5-12 MP)")
    bench_pairs.add_argument("--batch-size", type=positive, default=256, help="pairs per batch")
    bench_pairs.add_argument("--image-size", type=positive, default=224, help="side of the train crops, in pixels")
    bench_pairs.add_argument("--context-length", type=positive, default=77, help="caption tokens, padded to it")
    bench_pairs.add_argument("--vocab-size", type=positive, default=4096, help="of the BPE tokenizer trained when "
                             "indexing SRC")
    bench_pairs.add_argument("--workers", type=positive, help="DataLoader workers of open_clip's pipeline and decode "
                             "threads of dataio's (default: DATAIO_NUM_WORKERS, else all cores)")
    bench_pairs.add_argument("--epochs", type=positive, default=3, help="timed epochs per loader (the median counts)")
    bench_pairs.add_argument("--warmup", type=int, default=1, help="untimed epochs per loader before the timed ones")

    bench_views = bench_kinds.add_parser("views", help="multi-crop views (DINO) against DINOv2's recipe on the same "
                                         "photos")
    bench_views.add_argument("src", type=Path, help="an image folder (generated first when it holds no image), packed "
                             "once into SRC-views with --kind views")
    bench_views.add_argument("--out", type=Path, default=Path("bench/results"), help="folder for views.json and "
                             "views.png")
    bench_views.add_argument("--photos", type=positive, default=1000, help="photos generated when SRC holds no image")
    bench_views.add_argument("--photo-class", default="imagenet", help="their size: small (~50 KB), imagenet (~110 KB) "
                             "or camera (5-12 MP)")
    bench_views.add_argument("--batch-size", type=positive, default=64, help="images per batch (each 10 views)")
    bench_views.add_argument("--workers", type=positive, help="DataLoader workers of DINOv2's pipeline and decode "
                             "threads of dataio's (default: DATAIO_NUM_WORKERS, else all cores)")
    bench_views.add_argument("--epochs", type=positive, default=3, help="timed epochs per loader (the median counts)")
    bench_views.add_argument("--warmup", type=int, default=1, help="untimed epochs per loader before the timed ones")

    bench_sampler = bench_kinds.add_parser("sampler", help="shard mixing of the two-level shuffle")
    bench_sampler.add_argument("--out", type=Path, default=Path("bench/results"),
                               help="folder for sampler.json and sampler.png")
    bench_sampler.add_argument("--num-samples", type=positive, default=1_281_167,
                               help="samples of the simulated data set (ImageNet-1k's train split)")
    bench_sampler.add_argument("--num-shards", type=positive, default=1024, help="shards of the simulated data set")


def run_images(args: argparse.Namespace) -> int:
    from dataio.bench.images import BenchImagesConfig, bench_images
    from dataio.bench.photo_classes import bench_photo_classes

    remote = args.shards if isinstance(args.shards, str) else None  # a URL: local shards converted on the fly
    config = BenchImagesConfig(
        src=args.src, shards=None if remote else args.shards, remote=remote,
        storage_options=storage_options_of(args.storage_option), out=args.out, batch_size=args.batch_size,
        image_size=args.image_size,
        num_workers=args.workers or default_workers(), epochs=args.epochs, warmup=args.warmup, rounds=args.rounds,
        **({"loaders": tuple(n.strip() for n in args.loaders.split(",") if n.strip())} if args.loaders else {}),
        photo_classes=tuple(name.strip() for name in (args.photo_classes or "").split(",") if name.strip()),
        photo_images=args.photo_images, limit_images=args.limit_images,
    )
    (bench_photo_classes if config.photo_classes else bench_images)(config)  # the ratio rows on each photo class
    return 0


def run_augment(args: argparse.Namespace) -> int:
    from dataio.bench.augment_bench import BenchAugmentConfig, bench_augment

    options = {"device": args.device} if args.device else {}
    bench_augment(BenchAugmentConfig(out=args.out, batch_size=args.batch_size, image_size=args.image_size,
                                     repeats=args.repeats, **options))
    return 0


def run_text(args: argparse.Namespace) -> int:
    from dataio.bench.text_bench import BenchTextConfig, bench_text

    bench_text(BenchTextConfig(src=tuple(args.src), shards=args.shards, out=args.out, max_tokens=args.max_tokens,
                               max_length=args.max_length, vocab_size=args.vocab_size,
                               num_workers=args.workers or default_workers(), epochs=args.epochs))
    return 0


def run_sampler(args: argparse.Namespace) -> int:
    from dataio.bench.sampler_bench import BenchSamplerConfig, bench_sampler

    bench_sampler(BenchSamplerConfig(out=args.out, num_samples=args.num_samples, num_shards=args.num_shards))
    return 0


def run_detection(args: argparse.Namespace) -> int:
    from dataio.bench.detection_bench import BenchDetectionConfig, bench_detection

    bench_detection(BenchDetectionConfig(images=args.images, annotations=args.annotations, shards=args.shards,
                                         out=args.out, batch_size=args.batch_size, image_size=args.image_size,
                                         num_workers=args.workers or default_workers(), epochs=args.epochs,
                                         warmup=args.warmup))
def run_views(args: argparse.Namespace) -> int:
    from dataio.bench.views_bench import BenchViewsConfig, bench_views

    bench_views(BenchViewsConfig(src=args.src, out=args.out, photos=args.photos, photo_class=args.photo_class,
                                 batch_size=args.batch_size, num_workers=args.workers or default_workers(),
                                 epochs=args.epochs, warmup=args.warmup))
    return 0


def run_pairs(args: argparse.Namespace) -> int:
    from dataio.bench.pair_bench import BenchPairsConfig, bench_pairs

    bench_pairs(BenchPairsConfig(src=args.src, out=args.out, photos=args.photos, photo_class=args.photo_class,
                                 batch_size=args.batch_size, image_size=args.image_size,
                                 context_length=args.context_length, vocab_size=args.vocab_size,
                                 num_workers=args.workers or default_workers(), epochs=args.epochs, warmup=args.warmup))
    return 0
