#!/bin/bash
# Interleaved A/B of bench sim-speed's case runner: base (163666e) and new, each case as bench sim-speed starts it.
F3='{"name":"sparrow Fig. 3 (10,000 workers)","policy":"sparrow","seed":1,"workload":{"kind":"w4","workers":10000,"jobs":20000,"load":0.8}}'
W3='{"name":"W3 tarcil","policy":"tarcil","seed":1,"workload":{"kind":"w3","jobs":7200}}'
for round in 1 2 3; do
  for c in F3 W3; do
    for side in base new; do
      [ $(( round % 2 )) = 0 ] && side=$([ $side = base ] && echo new || echo base)
      d=$NEW; [ $side = base ] && d=$BASE
      cd $d; l=$(cut -d' ' -f1 /proc/loadavg)
      out=$(/usr/bin/time -f "%U" -o /tmp/u node --expose-gc --max-semi-space-size=32 --import tsx src/sim/speed/case.ts "${!c}")
      echo "$out" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(json.dumps({'round':$round,'case':'$c','side':'$side','wallS':round(d['wallS'],2),'userS':float(open('/tmp/u').read().split()[-1]),'peakRssMb':round(d['peakRssMb'],1),'mean':d['meanResponseMs'],'events':d['events'],'jobs':d['jobs'],'load1':$l}))"
    done
  done
done
