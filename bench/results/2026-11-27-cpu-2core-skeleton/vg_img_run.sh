#!/bin/bash
# Instructions (callgrind Ir) of ImageLoader passes (1 decode thread): Ir(1 pass) - Ir(0 passes), before and after.
for mode in train eval; do
  for passes in 0 1; do
    valgrind --tool=callgrind --callgrind-out-file=/dev/null $BEFORE vg_img.py $mode $passes 2>&1 | grep "I   refs" | sed "s/^/$mode $passes before /" &
    valgrind --tool=callgrind --callgrind-out-file=/dev/null $AFTER vg_img.py $mode $passes 2>&1 | grep "I   refs" | sed "s/^/$mode $passes after /" &
    wait
  done
done
