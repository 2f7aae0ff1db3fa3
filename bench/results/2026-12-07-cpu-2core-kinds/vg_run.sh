#!/bin/bash
# Instructions (callgrind Ir) of one loader pass of each kind (1 decode thread), before and after: Ir(1) - Ir(0).
cd /tmp/speed
BEFORE=/work/before/.venv/bin/python
AFTER=/work/wt-kinds/.venv/bin/python
for kind in train eval pairs detection bucket budget pack fixed; do
  for passes in 0 1; do
    for side in before after; do
      PY=$([ $side = before ] && echo $BEFORE || echo $AFTER)
      ir=$(nice -n 10 valgrind --tool=callgrind --callgrind-out-file=/dev/null $PY vg_kind.py $kind $passes 2>&1 | grep "I   refs" | tr -d ',' | awk '{print $NF}')
      echo "$kind $passes $side $ir"
    done
  done
done
