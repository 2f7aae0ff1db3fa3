#!/bin/bash
# Instructions (callgrind Ir) of TextLoader passes: Ir(2 passes) - Ir(0 passes), before and after, per mode.
for mode in ${MODES:-bucket budget-8k}; do
  for passes in 0 2; do
    valgrind --tool=callgrind --callgrind-out-file=/dev/null $BEFORE vg_text.py $mode $passes 2>&1 | grep "I   refs" | sed "s/^/$mode $passes before /" &
    valgrind --tool=callgrind --callgrind-out-file=/dev/null $AFTER vg_text.py $mode $passes 2>&1 | grep "I   refs" | sed "s/^/$mode $passes after /" &
    wait
  done
done
