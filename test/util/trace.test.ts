import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd.ts';
import { GroupCommit } from '../../src/store/group-commit.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { TxnRequest } from '../../src/store/types.ts';
import { closeTrace, flushTrace, openTrace, trace, traceAt, traceIds, traceRequest, traceRequests, tracingOn } from '../../src/util/trace.ts';

const endpoint = inject('etcdEndpoint');
const dirs: string[] = [];

function traceDir(): { file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-trace-'));
  dirs.push(dir);
  return { file: openTrace(dir) };
}

/** The lines written so far, as [time, point, id]. */
function written(file: string): [number, string, string][] {
  flushTrace();
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => {
      const [t, p, id] = l.split(' ');
      return [Number(t), p as string, id as string];
    });
}

afterEach(() => {
  closeTrace();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function put(key: string): TxnRequest {
  return { compare: [{ key, target: 'version', op: '==', value: 0 }], success: [{ type: 'put', key, value: 'x' }] };
}

describe('trace points', () => {
  it('are written only while a trace is open, one line each: epoch time, point, id', () => {
    trace('before', 'j0');
    expect(tracingOn()).toBe(false);
    const { file } = traceDir();
    expect(file.endsWith(`${process.pid}.trace`)).toBe(true);
    const t0 = Date.now();
    trace('submit.received', 'j1');
    traceAt('bench.submitted', 'j1', 1234.5);
    const a = {};
    const b = {};
    traceIds.set(a, 'j2#3');
    traceRequests('group.sent', [a, b]);
    traceRequest('commit.asked', 'j4', b);
    traceRequests('store.sent', [a, b]);
    const lines = written(file);
    expect(lines.map(([, p, id]) => `${p} ${id}`)).toEqual([
      'submit.received j1',
      'bench.submitted j1',
      'group.sent j2#3',
      'commit.asked j4',
      'store.sent j2#3',
      'store.sent j4',
    ]);
    expect(lines[0]?.[0]).toBeGreaterThanOrEqual(t0 - 1);
    expect(lines[0]?.[0]).toBeLessThan(t0 + 1000);
    expect(lines[1]?.[0]).toBe(1234.5);
    closeTrace();
    expect(tracingOn()).toBe(false);
    trace('after', 'j1');
    traceRequest('after', 'j5', {});
    expect(written(file)).toHaveLength(6);
  });

  it('a group commit marks when each traced transaction leaves, on the embedded store', async () => {
    const { file } = traceDir();
    const gc = new GroupCommit(new MemoryStore(), { maxInFlight: 1 });
    const reqs = [put('/t/a'), put('/t/b'), put('/t/c')];
    reqs.forEach((r, i) => traceIds.set(r, `j#${i}`));
    const res = await Promise.all(reqs.map((r) => gc.txn(r)));
    expect(res.every((r) => r.succeeded)).toBe(true);
    const sent = written(file)
      .filter(([, p]) => p === 'group.sent')
      .map(([, , id]) => id);
    expect(sent.sort()).toEqual(['j#0', 'j#1', 'j#2']);
  });

  it('on etcd, each traced transaction is marked when its call starts and when it is answered, in that order', async () => {
    const { file } = traceDir();
    const store = await EtcdStore.connect({ endpoints: [endpoint] });
    try {
      const gc = new GroupCommit(store, { maxInFlight: 1 });
      const p = `/tarcil-test/trace/${randomUUID()}/`;
      const reqs = [put(`${p}a`), put(`${p}b`)];
      traceIds.set(reqs[0] as object, 'k#0');
      // The second is not traced: it leaves no line.
      const res = await Promise.all(reqs.map((r) => gc.txn(r)));
      expect(res.every((r) => r.succeeded)).toBe(true);
      const mine = written(file).filter(([, , id]) => id === 'k#0');
      expect(mine.map(([, point]) => point)).toEqual(['group.sent', 'store.sent', 'store.answered']);
      const times = mine.map(([t]) => t);
      expect(times).toEqual([...times].sort((x, y) => x - y));
      expect(written(file).filter(([, , id]) => id !== 'k#0')).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
