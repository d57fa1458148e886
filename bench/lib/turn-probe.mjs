// Event-loop stalls of the process it is preloaded into (`node --import ./bench/lib/turn-probe.mjs`),
// with what the event loop's own thread did meanwhile. A timer ticks every 5 ms; a tick that comes
// more than 20 ms late is a stall, recorded with how late it was, how long the main thread ran on a
// core meanwhile and how long it waited for one (Linux's /proc/<pid>/task/<pid>/schedstat: run and
// run-queue wait in ns, of that thread alone, so neither GC helper threads nor other processes count
// as its work). On exit the stalls are written to $TURN_PROBE_OUT (`%p` in it: the process id, so that
// one setting serves every process of a run, given through TARCIL_NODE_ARGS) as JSON:
// {"stalls": [[epoch ms at the tick, ms late, ms run, ms waited for a core, µs of the monotonic clock
//   at the tick before and at this one (the clock of a --cpu-prof profile's timestamps)], ...],
//  "gc": [[epoch ms at its end, ms, V8's kind as perf_hooks' constants: 1 minor, 4 major, 8 incremental, 16 weak callbacks], ...]}
// (the garbage collections of 10 ms or more).
import { Buffer } from 'node:buffer';
import { closeSync, openSync, readSync, writeFileSync } from 'node:fs';
import { performance, PerformanceObserver } from 'node:perf_hooks';
import process from 'node:process';
import { setInterval } from 'node:timers';

const out = process.env.TURN_PROBE_OUT?.replaceAll('%p', String(process.pid));
if (out) {
  const TICK_MS = 5;
  const fd = openSync(`/proc/${process.pid}/task/${process.pid}/schedstat`, 'r');
  const buf = Buffer.alloc(128);
  const sched = () => {
    const n = readSync(fd, buf, 0, buf.length, 0);
    const [run, wait] = buf.toString('latin1', 0, n).split(' ');
    return [Number(run) / 1e6, Number(wait) / 1e6];
  };
  const stalls = [];
  const gc = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.duration >= 10) gc.push([Math.round(performance.timeOrigin + e.startTime + e.duration), Math.round(e.duration), e.detail?.kind ?? 0]);
    }
  }).observe({ entryTypes: ['gc'] });
  const mono = () => Number(process.hrtime.bigint() / 1000n);
  let lastWall = performance.now();
  let lastMono = mono();
  let [lastRun, lastWait] = sched();
  setInterval(() => {
    const now = performance.now();
    const at = mono();
    const [run, wait] = sched();
    const late = now - lastWall - TICK_MS;
    if (late > 20) stalls.push([Date.now(), Math.round(late), Math.round(run - lastRun), Math.round(wait - lastWait), lastMono, at]);
    lastWall = now;
    lastMono = at;
    lastRun = run;
    lastWait = wait;
  }, TICK_MS).unref();
  process.on('exit', () => {
    closeSync(fd);
    writeFileSync(out, JSON.stringify({ stalls, gc }));
  });
}
