#!/bin/bash
# dataio bench images|pairs|detection|text, before (e6acd70) and after, alternating, 2 rounds; CPU us per sample.
cd /tmp/speed
BEFORE=/work/before/.venv/bin/python
AFTER=${AFTER:-/work/main/.venv/bin/python}
for round in 1 2; do
  for side in before after; do
    PY=$([ $side = before ] && echo $BEFORE || echo $AFTER)
    o=out/$side-$round
    mkdir -p $o
    $PY -m dataio bench images photos --shards shards-img --loaders standard,dataio,standard_eval,dataio_eval --batch-size 64 --workers 2 --epochs 3 --warmup 1 --out $o > $o/images.txt 2>&1
    $PY -m dataio bench pairs pairs --batch-size 64 --image-size 160 --workers 2 --epochs 3 --warmup 1 --out $o > $o/pairs.txt 2>&1
    $PY -m dataio bench detection coco/images coco/instances.json --shards coco-shards --batch-size 16 --image-size 320 --workers 2 --epochs 3 --warmup 1 --out $o > $o/detection.txt 2>&1
    $PY -m dataio bench text corpus.txt --shards shards-txt --workers 2 --epochs 3 --out $o > $o/text.txt 2>&1
    echo "$round $side done $(date +%T)"
  done
done
