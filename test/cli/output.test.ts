/**
 * The client's output against a running `tarcil up` (embedded store, simulated executor): -o json
 * of status, jobs, cluster and explain parses and carries the API's field names (proto3's
 * canonical JSON mapping), -o yaml parses to the same, -o wide adds columns, --watch prints a
 * change as it happens (then is stopped), `cluster` summarises by platform and rack while
 * `--servers` lists servers with a filter and a limit, and output to a pipe carries no ANSI escape.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { tarcil as daemon, type TarcilProc } from '../support/procs.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));
const ANSI = /\x1b\[/; // eslint-disable-line no-control-regex

interface Result {
  code: number | null;
  out: string;
  err: string;
}

function run(args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): Promise<Result> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'silent', ...opts.env } });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdin.end(opts.stdin ?? '');
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, err })));
}

const spec = (name: string, durationMs: number, tasks = 2): string => JSON.stringify({ name, profile: 'spark-lr', tasks, durationMs });

/** The proto3 JSON names of the messages' fields (a few that must never change). */
const JOB_FIELDS = [
  'id',
  'name',
  'state',
  'profile',
  'tasks',
  'priority',
  'mode',
  'owner',
  'submittedAtMs',
  'updatedAtMs',
  'finishedAtMs',
  'message',
  'taskStates',
  'taskList',
  'rescheduled',
  'cancelRequested',
  'tasksOmitted',
  'nextTaskFrom',
];

describe('-o, --watch and the cluster summary against tarcil up', () => {
  let up: TarcilProc | undefined;
  let server = '';
  let jobId = '';

  beforeAll(async () => {
    // Port 0: the server binds a free port itself and prints it (a port picked here could be
    // taken by another test's process before tarcil up binds it).
    up = daemon(['up', '--port', '0', '--metrics-port', '0', '--http-port', '0']);
    const m = await up.waitFor(/Scheduler gRPC\s+(\S+:\d+)/, 60_000);
    server = m[1] ?? '';
    const r = await run(['submit', '-', '--wait', '--server', server], { stdin: spec('listed', 50) });
    expect(r.code, r.err).toBe(EXIT.OK);
    jobId = /submitted (\S+)/.exec(r.out)?.[1] ?? '';
  }, 120_000);

  afterAll(async () => {
    await up?.kill();
  });

  it('-o json of status, jobs, cluster and explain is the API message with its canonical field names', async () => {
    const status = await run(['status', jobId, '-o', 'json', '--server', server]);
    expect(status.code, status.err).toBe(EXIT.OK);
    const job = JSON.parse(status.out) as Record<string, unknown>;
    expect(Object.keys(job)).toEqual(expect.arrayContaining(JOB_FIELDS));
    expect(job).toMatchObject({ id: jobId, name: 'listed', state: 'succeeded', tasks: 2, taskStates: { succeeded: 2 } });
    expect((job.taskList as Record<string, unknown>[])[0]).toMatchObject({
      index: 0,
      state: 'succeeded',
      ru: { server: expect.stringMatching(/^s\d+$/) as unknown },
    });
    // --json is the older spelling of -o json.
    expect(JSON.parse((await run(['status', jobId, '--json', '--server', server])).out)).toEqual(job);

    const jobs = JSON.parse((await run(['jobs', '--output', 'json', '--server', server])).out) as {
      jobs: Record<string, unknown>[];
      retainMs: string;
      total: number;
    };
    expect(Object.keys(jobs)).toEqual(['jobs', 'retainMs', 'total']);
    // Every job that matched is listed: the count says so.
    expect(jobs.total).toBe(jobs.jobs.length);
    // uint64 is a string in proto3 JSON.
    expect(jobs.retainMs).toBe('3600000');
    expect(jobs.jobs.map((j) => j.id)).toContain(jobId);

    const cluster = JSON.parse((await run(['cluster', '-o', 'json', '--server', server])).out) as Record<string, unknown>;
    expect(Object.keys(cluster)).toEqual(['servers', 'rus', 'free', 'busy', 'down', 'buckets', 'queuedJobs', 'activeJobs', 'unschedulable']);
    expect(cluster.servers).toHaveLength(10);
    expect(Object.keys((cluster.servers as Record<string, unknown>[])[0] ?? {})).toEqual(
      expect.arrayContaining([
        'id',
        'platform',
        'rack',
        'state',
        'endpoint',
        'rus',
        'free',
        'busy',
        'cordoned',
        'draining',
        'drainDeadlineMs',
        'cordonReason',
        'leftAtMs',
      ]),
    );

    const explain = JSON.parse((await run(['explain', jobId, '-o', 'json', '--server', server])).out) as Record<string, unknown>;
    expect(explain).toMatchObject({ jobId, state: 'succeeded', inProgress: false });
    expect(Object.keys(explain)).toEqual(
      expect.arrayContaining(['jobId', 'state', 'agent', 'target', 'admission', 'samples', 'placements', 'conflicts', 'retries', 'stages', 'text']),
    );
    expect((explain.placements as Record<string, unknown>[])[0]).toMatchObject({
      task: expect.any(Number) as unknown,
      q: expect.any(Number) as unknown,
      commitRevision: expect.stringMatching(/^\d+$/) as unknown,
    });
  });

  it('-o yaml parses to the same document as -o json', async () => {
    for (const args of [['status', jobId], ['explain', jobId], ['jobs'], ['cluster']]) {
      const json = await run([...args, '-o', 'json', '--server', server]);
      const yaml = await run([...args, '-o', 'yaml', '--server', server]);
      expect(yaml.code, args.join(' ')).toBe(EXIT.OK);
      const a = JSON.parse(json.out) as Record<string, unknown>;
      const b = parseYaml(yaml.out) as Record<string, unknown>;
      // Both ask the front-end again: what changes between two calls (a job's age in the list) aside.
      expect(Object.keys(b), args.join(' ')).toEqual(Object.keys(a));
      if (args[0] !== 'cluster') expect(b, args.join(' ')).toEqual(a);
    }
    const bad = await run(['jobs', '-o', 'xml', '--server', server]);
    expect(bad.code).toBe(EXIT.USAGE);
    expect(bad.err).toContain('-o/--output must be one of json, yaml, wide');
  });

  it('-o wide adds columns', async () => {
    const plain = await run(['jobs', '--server', server]);
    const wide = await run(['jobs', '-o', 'wide', '--server', server]);
    for (const col of ['priority', 'owner', 'rescheduled']) {
      expect(wide.out).toContain(col);
      expect(plain.out).not.toContain(col);
    }
    expect((await run(['status', jobId, '-o', 'wide', '--server', server])).out).toMatch(/placed.*started.*ended.*log/);
    // explain -o wide: the default account unchanged, then the decision record in full.
    const account = await run(['explain', jobId, '--server', server]);
    const full = await run(['explain', jobId, '-o', 'wide', '--server', server]);
    expect(full.code, full.err).toBe(EXIT.OK);
    expect(full.out.startsWith(account.out.trimEnd())).toBe(true);
    expect(account.out).not.toContain('decisions (');
    expect(full.out).toMatch(/decisions \(1\):[\s\S]*admission verdicts \(\d+\):[\s\S]*sample attempts \(\d+\):[\s\S]*placements \(2\):/);
    // Each placement with its attempt (as the -o json document has it) and its server's platform and rack (as the cluster lists them).
    const servers = (
      JSON.parse((await run(['cluster', '-o', 'json', '--server', server])).out) as { servers: { id: string; platform: string; rack: string }[] }
    ).servers;
    const placements = (
      JSON.parse((await run(['explain', jobId, '-o', 'json', '--server', server])).out) as {
        placements: { task: number; attempt: number; ru: { server: string; index: number } }[];
      }
    ).placements;
    // A first placement is attempt 0 in the decision record as in the task's record.
    const taskList = (JSON.parse((await run(['status', jobId, '-o', 'json', '--server', server])).out) as { taskList: { index: number; attempt?: number }[] })
      .taskList;
    expect(placements.map((p) => [p.task, p.attempt ?? 0])).toEqual(placements.map((p) => [p.task, taskList.find((t) => t.index === p.task)?.attempt ?? 0]));
    expect(placements.every((p) => (p.attempt ?? 0) === 0)).toBe(true);
    for (const p of placements) {
      const s = servers.find((x) => x.id === p.ru.server);
      expect(s).toBeDefined();
      expect(full.out).toMatch(
        new RegExp(`${p.task}\\s+│\\s+${p.attempt}\\s+│\\s+${p.ru.server}/${p.ru.index}\\s+│\\s+${s?.platform}\\s+│\\s+${s?.rack}\\s+│`),
      );
    }
  });

  it('jobs --watch prints a job as it appears and as it changes, one JSON document per line', async () => {
    const watch = daemon(['jobs', '--watch', '-o', 'json', '--interval', '100ms', '--server', server]);
    try {
      await watch.waitFor(new RegExp(`"id":"${jobId}"`), 30_000);
      const r = await run(['submit', '-', '--server', server], { stdin: spec('watched', 1500) });
      const id = /submitted (\S+)/.exec(r.out)?.[1] ?? '';
      await watch.waitFor(new RegExp(`\\{"id":"${id}","name":"watched","state":"(queued|admitted|placed|running)"`), 30_000);
      await watch.waitFor(new RegExp(`\\{"id":"${id}","name":"watched","state":"succeeded"`), 30_000);
      for (const l of watch.output().trim().split('\n')) expect(JSON.parse(l)).toHaveProperty('id');
    } finally {
      await watch.kill();
    }
  });

  it('status --watch follows the job until it ends; cluster --watch prints again when the cell changes', async () => {
    const r = await run(['submit', '-', '--server', server], { stdin: spec('followed', 5000, 1) });
    const id = /submitted (\S+)/.exec(r.out)?.[1] ?? '';
    const cluster = daemon(['cluster', '--watch', '--interval', '100ms', '--server', server]);
    try {
      const status = await run(['status', id, '-w', '-o', 'json', '--server', server]);
      expect(status.code, status.err).toBe(EXIT.OK);
      const events = status.out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { job: { state: string }; revision: string; tasks: unknown[] });
      expect(events.at(-1)?.job.state).toBe('succeeded');
      expect(events.length).toBeGreaterThan(1);
      // The cluster's summary was printed more than once: a task ran on an RU, then left it.
      await cluster.waitFor(/— \d\d:\d\d:\d\d[\s\S]*— \d\d:\d\d:\d\d/, 30_000);
    } finally {
      await cluster.kill();
    }
  });

  it('cluster summarises by platform and rack; --servers lists servers, filtered and limited', async () => {
    const summary = await run(['cluster', '--server', server]);
    expect(summary.code).toBe(EXIT.OK);
    expect(summary.out).toMatch(/platform.*servers.*RUs.*free/);
    expect(summary.out).toMatch(/m3-large/);
    expect(summary.out).toMatch(/rack.*servers/);
    expect(summary.out).toMatch(/10 servers, 24 RUs/);
    expect(summary.out).not.toMatch(/s0000/); // no line per server

    const list = await run(['cluster', '--servers', '--platform', 'm3-large', '--limit', '2', '--server', server]);
    expect(list.code).toBe(EXIT.OK);
    expect(list.out.match(/\bs\d{4}\b/g)).toHaveLength(2);
    expect(list.out).not.toMatch(/c3-large|r3-xlarge/);
    expect(list.out).toContain('2 more server(s) not listed (--limit 2');
    expect(list.out).toContain('4 of 10 servers match the filter');

    const json = JSON.parse((await run(['cluster', '--servers', '--rack', 'r001', '-o', 'json', '--server', server])).out) as { servers: { rack: string }[] };
    expect(json.servers.length).toBe(5);
    expect(new Set(json.servers.map((s) => s.rack))).toEqual(new Set(['r001']));
    const none = await run(['cluster', '--servers', '--state', 'down', '--server', server]);
    expect(none.out).toContain('no servers match the filter');
  });

  it('writes no ANSI escape to a pipe, nor with NO_COLOR or --no-color', async () => {
    for (const args of [['cluster'], ['cluster', '--servers'], ['jobs'], ['status', jobId]]) {
      for (const extra of [
        { args: [], env: {} },
        { args: ['--no-color'], env: {} },
        { args: [], env: { NO_COLOR: '1', FORCE_COLOR: '1' } },
      ] as { args: string[]; env: Record<string, string> }[]) {
        const r = await run([...args, ...extra.args, '--server', server], { env: extra.env });
        expect(r.code, args.join(' ')).toBe(EXIT.OK);
        expect(r.out, args.join(' ')).not.toMatch(ANSI);
      }
    }
  });
});
