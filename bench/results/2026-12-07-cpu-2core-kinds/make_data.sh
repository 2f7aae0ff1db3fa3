#!/bin/bash
# Data for the before/after CPU comparison: made once with the before venv (the same bytes for both sides).
set -e
PY=/work/before/.venv/bin/python
cd /tmp/speed
[ -d photos ] || $PY -m dataio synth photos --classes 4 --per-class 125 --photo-class imagenet
[ -f shards-img/manifest.json ] || $PY -m dataio convert images photos shards-img --no-progress
[ -f corpus.txt ] || $PY -m dataio synth-text corpus.txt --documents 20000
[ -f shards-txt/manifest.json ] || $PY -m dataio convert text corpus.txt shards-txt --train-tokenizer bpe --vocab-size 4096 --max-length 512 --no-progress
$PY - <<'PYEOF'
from pathlib import Path
from dataio.formats.images.synthetic_pair_writers import write_img2dataset
from dataio.formats.images.synthetic_pairs import SyntheticPairsConfig
from dataio.formats.images.wds_index import IndexConfig, index_shards
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.formats.coco.synthetic_coco import SyntheticCocoConfig, write_coco_folder
from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
pairs = Path("pairs")
if not (pairs / "manifest.json").exists():
    write_img2dataset(pairs, SyntheticPairsConfig(count=512, photo_class="imagenet", samples_per_shard=128))
    index_shards(IndexConfig(shards=(pairs,), tokenizer=TokenizerConfig(train="bpe", vocab_size=4096), progress=False))
if not Path("coco-shards/manifest.json").exists():
    images, annotations = write_coco_folder(Path("coco"), SyntheticCocoConfig(images=128, empty=4, seed=1))
    convert_coco(ConvertCocoConfig(images=images, annotations=annotations, out=Path("coco-shards"), progress=False))
PYEOF
