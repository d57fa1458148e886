#!/bin/bash
# Interleaved A/B of `tarcil bench compare` (2 worker threads, from the sources).
for round in 1 2; do
  for side in new base; do
    d=$NEW; [ $side = base ] && d=$BASE
    cd $d; l=$(cut -d' ' -f1-3 /proc/loadavg)
    /usr/bin/time -f "%e %U %M" -o /tmp/simprof/t.$side.$round node src/cli/bin.js bench compare --out /tmp/simprof/cmp-$side-$round > /dev/null 2>&1
    echo "round $round $side wall_s,user_s,maxrss_kb: $(cat /tmp/simprof/t.$side.$round) load: $l"
  done
done
