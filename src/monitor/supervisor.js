// A task's supervisor (the process executor's, src/monitor/executor.ts): a small Node process that
// the monitor starts for each task attempt and that outlives a monitor frozen or killed. Plain
// JavaScript with no imports but Node's own, so that it starts fast from the sources and from the
// package alike.
//
// It runs the task's wrapper shell in a process group of its own, writes the group's id to
// `<base>.pid`, and:
//   - reads the node's deadline (CLOCK_MONOTONIC milliseconds, written by the monitor while its
//     lease is confirmed: the last confirmed keepalive + TTL + disconnect grace) every `checkMs`;
//     once it has passed, it sends the group SIGTERM, then SIGKILL `termMs` later, waits until the
//     group is gone and exits with `fencedExit`: the front-ends may place the task elsewhere from
//     then on, and its first copy is already dead;
//   - on SIGTERM or SIGINT (the monitor stopping the task) does the same with `killGraceMs`;
//   - holds the write end of the wrapper's stdin: if the supervisor dies (SIGKILL), the wrapper's
//     watchdog reads end-of-file and kills the task's group, so no task runs unsupervised;
//   - when the wrapper exits by itself (it has written `<base>.exit` first), exits with its code,
//     or by its signal.
//
// Its one argument is a JSON object: { argv, env, base, deadlineFile, deadline, checkMs, termMs,
// killGraceMs, fencedExit }; `env` is the task's environment.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import process from 'node:process';
import { clearInterval, setInterval, setTimeout } from 'node:timers';

/** CLOCK_MONOTONIC in ms: the clock the monitor writes the deadline on (one per machine). */
function monotonicMs() {
  return Number(process.hrtime.bigint() / 1_000_000n);
}

function main() {
  let cfg;
  try {
    cfg = JSON.parse(process.argv[2] ?? '');
    if (!Array.isArray(cfg.argv) || cfg.argv.length === 0 || typeof cfg.base !== 'string' || typeof cfg.deadlineFile !== 'string' || !Number.isFinite(cfg.deadline)) throw new Error('missing fields');
  } catch (err) {
    process.stderr.write(`tarcil task supervisor: bad argument (${err.message}): expected a JSON object {argv, env, base, deadlineFile, deadline, checkMs, termMs, killGraceMs, fencedExit}\n`);
    process.exit(64);
  }
  const checkMs = Number(cfg.checkMs) > 0 ? Number(cfg.checkMs) : 200;
  const termMs = Number(cfg.termMs) >= 0 ? Number(cfg.termMs) : 500;
  const killGraceMs = Number(cfg.killGraceMs) >= 0 ? Number(cfg.killGraceMs) : 2000;
  const fencedExit = Number.isInteger(cfg.fencedExit) ? cfg.fencedExit : 75;

  let child;
  try {
    child = spawn(cfg.argv[0], cfg.argv.slice(1), { stdio: ['pipe', 'inherit', 'inherit'], detached: true, ...(cfg.env ? { env: cfg.env } : {}) });
  } catch (err) {
    process.stderr.write(`cannot start ${cfg.argv[0]}: ${err.message}\n`);
    process.exit(127);
  }
  child.stdin?.on('error', () => undefined);
  const pgid = child.pid;
  if (pgid !== undefined) {
    try {
      writeFileSync(`${cfg.base}.pid.tmp`, String(pgid));
      renameSync(`${cfg.base}.pid.tmp`, `${cfg.base}.pid`);
    } catch {
      // the log dir went away: only a restarted monitor's view of this attempt is lost
    }
  }

  const signalGroup = (sig) => {
    if (pgid === undefined) return;
    try {
      process.kill(-pgid, sig);
    } catch {
      // already gone
    }
  };
  // A member of the group that still runs: zombies (dead, waiting for whoever adopted them to
  // reap them, which may take a while) do not count.
  const groupAlive = () => {
    if (pgid === undefined) return false;
    try {
      process.kill(-pgid, 0);
    } catch {
      return false;
    }
    let entries;
    try {
      entries = readdirSync('/proc');
    } catch {
      return true;
    }
    for (const e of entries) {
      if (!/^\d+$/.test(e)) continue;
      try {
        const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (Number(f[2]) === pgid && f[0] !== 'Z' && f[0] !== 'X') return true;
      } catch {
        // gone meanwhile
      }
    }
    return false;
  };

  let deadline = cfg.deadline;
  let stopping = false;
  let fenced = false;
  let exited = false;
  const stop = (graceMs) => {
    if (stopping) return;
    stopping = true;
    signalGroup('SIGTERM');
    setTimeout(() => signalGroup('SIGKILL'), graceMs).unref();
  };
  const check = () => {
    try {
      const n = Number(readFileSync(cfg.deadlineFile, 'utf8').trim());
      if (Number.isFinite(n) && n > 0) deadline = n;
    } catch {
      // not written yet, or being replaced: the last deadline read stands
    }
    if (!stopping && monotonicMs() >= deadline) {
      fenced = true;
      process.stderr.write(`tarcil task supervisor: no word from the node's monitor past its deadline; stopping the task\n`);
      stop(termMs);
    }
  };
  const timer = setInterval(check, checkMs);
  check();
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => stop(killGraceMs));

  const finish = (code, signal) => {
    if (exited) return;
    exited = true;
    clearInterval(timer);
    // The wrapper is gone; what else of its group remains goes too when the task was stopped.
    const started = Date.now();
    const wait = () => {
      if (stopping && groupAlive() && Date.now() - started < 2 * Math.max(killGraceMs, termMs) + 1000) {
        if (Date.now() - started > Math.max(killGraceMs, termMs)) signalGroup('SIGKILL');
        setTimeout(wait, 10);
        return;
      }
      if (fenced) process.exit(fencedExit);
      if (signal) {
        process.removeAllListeners(signal);
        try {
          process.kill(process.pid, signal);
        } catch {
          // fall through to an exit code
        }
        setTimeout(() => process.exit(128 + 15), 100);
        return;
      }
      process.exit(code ?? 1);
    };
    wait();
  };
  child.once('error', (err) => {
    process.stderr.write(`cannot start ${cfg.argv[0]}: ${err.message}\n`);
    exited = true;
    clearInterval(timer);
    process.exit(127);
  });
  child.once('exit', finish);
}

main();
