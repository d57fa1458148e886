// Event-loop stalls of the process it is preloaded into (`node --import ./bench/lib/stall-probe.mjs`),
// told apart by cause. A timer ticks every 5 ms; a tick that comes more than 20 ms late is a stall,
// recorded with how late it was and how much CPU the process used meanwhile (process.cpuUsage: all
// its threads). A stall the process spent working has about as much CPU as delay; one where the
// machine did not run it (other processes on the same cores) has little. On exit the stalls are
// written to $STALL_PROBE_OUT as JSON: [[epoch ms at the tick, ms late, CPU ms meanwhile], ...].
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setInterval } from 'node:timers';

const out = process.env.STALL_PROBE_OUT;
if (out) {
  const TICK_MS = 5;
  const stalls = [];
  let lastWall = performance.now();
  let lastCpu = process.cpuUsage();
  setInterval(() => {
    const now = performance.now();
    const cpu = process.cpuUsage(lastCpu);
    const late = now - lastWall - TICK_MS;
    if (late > 20) stalls.push([Date.now(), Math.round(late), Math.round((cpu.user + cpu.system) / 1000)]);
    lastWall = now;
    lastCpu = process.cpuUsage();
  }, TICK_MS).unref();
  process.on('exit', () => writeFileSync(out, JSON.stringify(stalls)));
}
