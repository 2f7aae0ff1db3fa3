#!/bin/bash
# Alternating before / after rounds (BEFORE, AFTER: the python of a venv holding each checkout) of the image and text benches, on the same data.
cd "$(dirname "$0")"  # with photos/imagenet, shards-img, corpus.txt and shards-txt made as the README says
for round in 1 2 3 4; do
  for side in before after; do
    if [ $side = before ]; then PY=$BEFORE; else PY=$AFTER; fi
    $PY -m dataio bench images photos/imagenet --shards shards-img --loaders dataio,dataio_eval --batch-size 64 --epochs 5 --warmup 1 --workers 2 --limit-images 50 --out out-img-$side-$round > log-img-$side-$round.txt 2>&1
    $PY -m dataio bench text corpus.txt --shards shards-txt --epochs 3 --workers 2 --out out-txt-$side-$round > log-txt-$side-$round.txt 2>&1
  done
done
echo done > speed.done
