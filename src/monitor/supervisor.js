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
//     or by its signal;
//   - with `report` (the node's store is etcd), when the task succeeded: tells the monitor at once
//     (a line on fd 3), then makes sure the success reaches the store even if the monitor cannot
//     write it (frozen, dead). It reads the RU record; once its mod revision is no longer the one
//     the attempt holds, someone (the monitor's report, an owner) has written, and it exits.
//     Past `report.waitMs`, and never later than the node's deadline, it writes the success
//     itself: the transaction the monitor uses to record an end (state/release.ts releaseRu),
//     fenced on the RU record's mod revision, so a stale write can never land — the RU freed
//     under the node's lease (its current id in `report.leaseFile`), or deleted if that lease is
//     gone (the node's RUs left the store with it), and the task record `succeeded`. It talks to
//     etcd's JSON gateway (POST /v3/kv/...), over TLS and with a user's token when the monitor's
//     store uses them. Why the write lands before the task may be placed again: state/node-fence.ts.
//
// Its one argument is a JSON object: { argv, env, base, deadlineFile, deadline, checkMs, termMs,
// killGraceMs, fencedExit, report? }; `env` is the task's environment. `report`: { endpoints,
// tls?: { caFile?, certFile?, keyFile? }, auth?: true (user and password in the supervisor's
// environment, TARCIL_SUPERVISOR_ETCD_USER / _PASSWORD), ruKey, rev, revFile, taskKey, record,
// freeValue, leaseFile, waitMs, pollMs }.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { Buffer } from 'node:buffer';
import process from 'node:process';
import { URL } from 'node:url';
import { clearInterval, setInterval, setTimeout } from 'node:timers';

/** CLOCK_MONOTONIC in ms: the clock the monitor writes the deadline on (one per machine). */
function monotonicMs() {
  return Number(process.hrtime.bigint() / 1_000_000n);
}

function main() {
  let cfg;
  try {
    cfg = JSON.parse(process.argv[2] ?? '');
    if (
      !Array.isArray(cfg.argv) ||
      cfg.argv.length === 0 ||
      typeof cfg.base !== 'string' ||
      typeof cfg.deadlineFile !== 'string' ||
      !Number.isFinite(cfg.deadline)
    )
      throw new Error('missing fields');
  } catch (err) {
    process.stderr.write(
      `tarcil task supervisor: bad argument (${err.message}): expected a JSON object {argv, env, base, deadlineFile, deadline, checkMs, termMs, killGraceMs, fencedExit}\n`,
    );
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
  const readDeadline = () => {
    try {
      const n = Number(readFileSync(cfg.deadlineFile, 'utf8').trim());
      if (Number.isFinite(n) && n > 0) deadline = n;
    } catch {
      // not written yet, or being replaced: the last deadline read stands
    }
    return deadline;
  };
  const check = () => {
    readDeadline();
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
      if (!stopping && !signal && code === 0 && cfg.report) {
        reportSuccess(cfg, readDeadline).then(
          () => process.exit(0),
          () => process.exit(0),
        );
        return;
      }
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

/** Base64 of a UTF-8 string (the gateway's bytes fields). */
const b64 = (s) => Buffer.from(s, 'utf8').toString('base64');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * One call to etcd's JSON gateway: the endpoints in turn, each with `timeoutMs`; the parsed
 * answer, or throws (the last endpoint's error). An answer with an `error` (or `message`) field
 * throws an Error whose `etcd` property holds that text.
 */
function gateway(r, path, body, token, timeoutMs = 2000) {
  const tls = r.tls ?? {};
  const read = (f) => (f ? readFileSync(f) : undefined);
  const ca = read(tls.caFile);
  const cert = read(tls.certFile);
  const key = read(tls.keyFile);
  const one = (endpoint) =>
    new Promise((resolve, reject) => {
      const url = new URL(path, endpoint);
      const secure = url.protocol === 'https:';
      const data = JSON.stringify(body);
      const req = (secure ? https : http).request(
        url,
        {
          method: 'POST',
          timeout: timeoutMs,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...(token ? { authorization: token } : {}) },
          ...(secure ? { ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) } : {}),
        },
        (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            let out;
            try {
              out = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
            } catch {
              return reject(new Error(`${endpoint}: HTTP ${res.statusCode}, not JSON`));
            }
            const msg = out.error ?? (res.statusCode !== 200 ? (out.message ?? `HTTP ${res.statusCode}`) : undefined);
            if (msg !== undefined) {
              const e = new Error(`${endpoint}: ${msg}`);
              e.etcd = String(msg);
              return reject(e);
            }
            resolve(out);
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${endpoint}: no answer in ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(data);
    });
  return r.endpoints.reduce(
    (p, endpoint) =>
      p.catch((err) => (err && err.etcd && !/not leader|unavailable|timed? ?out|no leader/i.test(err.etcd) ? Promise.reject(err) : one(endpoint))),
    Promise.reject(new Error('no endpoint')),
  );
}

/** What supervisor.js does on a task's success with `report` (see the head of this file). */
async function reportSuccess(cfg, deadline) {
  const r = cfg.report;
  // Tell the monitor now: it reports the outcome itself when it can (and learns from the run).
  try {
    const s = new net.Socket({ fd: 3, readable: false, writable: true });
    s.on('error', () => undefined);
    s.end('succeeded\n');
  } catch {
    // no channel (the monitor is gone): the store still hears of it below
  }
  let token;
  if (r.auth) {
    const name = process.env.TARCIL_SUPERVISOR_ETCD_USER ?? '';
    const password = process.env.TARCIL_SUPERVISOR_ETCD_PASSWORD ?? '';
    for (;;) {
      try {
        token = (await gateway(r, '/v3/auth/authenticate', { name, password })).token;
        break;
      } catch (err) {
        if (err.etcd)
          return process.stderr.write(`tarcil task supervisor: etcd refused the monitor's user (${err.message}); the monitor reports the outcome\n`);
        if (monotonicMs() >= deadline() + 60_000) return undefined;
        await sleep(r.pollMs);
      }
    }
  }
  const revNow = () => {
    try {
      const n = Number(readFileSync(r.revFile, 'utf8').trim());
      if (Number.isInteger(n) && n > r.rev) return n;
    } catch {
      // not moved on
    }
    return r.rev;
  };
  const started = monotonicMs();
  for (;;) {
    const rev = revNow();
    const t = monotonicMs();
    try {
      const got = await gateway(r, '/v3/kv/range', { key: b64(r.ruKey) }, token);
      const kv = got.kvs?.[0];
      // Written meanwhile (the monitor's report, an owner's decision): nothing left to do.
      if (!kv || Number(kv.mod_revision) !== rev) return undefined;
      if (t - started >= r.waitMs || t >= deadline()) {
        const record = JSON.stringify({ ...r.record, endedAt: Date.now() });
        const fence = [{ key: b64(r.ruKey), target: 'MOD', result: 'EQUAL', mod_revision: String(rev) }];
        const putTask = { request_put: { key: b64(r.taskKey), value: b64(record) } };
        let lease;
        try {
          lease = readFileSync(r.leaseFile, 'utf8').trim();
        } catch {
          lease = undefined;
        }
        let done;
        try {
          if (!lease) throw Object.assign(new Error('no lease written'), { etcd: 'lease not found' });
          done = await gateway(
            r,
            '/v3/kv/txn',
            { compare: fence, success: [{ request_put: { key: b64(r.ruKey), value: b64(r.freeValue), lease } }, putTask] },
            token,
          );
        } catch (err) {
          if (!err.etcd || !/lease not found/i.test(err.etcd)) throw err;
          // The node's lease is gone, and its free RUs with it: the RU leaves the store too.
          done = await gateway(r, '/v3/kv/txn', { compare: fence, success: [{ request_delete_range: { key: b64(r.ruKey) } }, putTask] }, token);
        }
        if (done.succeeded === true) {
          process.stderr.write(`tarcil task supervisor: the task succeeded and its monitor had not reported it; recorded it in the store\n`);
          rmSync(`${cfg.base}.attempt`, { force: true });
        }
        return undefined;
      }
    } catch (err) {
      if (err.etcd && !/not leader|unavailable|timed? ?out|no leader/i.test(err.etcd)) {
        process.stderr.write(`tarcil task supervisor: could not record the success (${err.message}); the monitor reports it\n`);
        return undefined;
      }
      // etcd unreachable: the fence keeps any later write safe; keep trying a while past the deadline
      if (t >= deadline() + 60_000) return undefined;
    }
    await sleep(r.pollMs);
  }
}

main();
