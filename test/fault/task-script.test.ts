/**
 * The fault suite's task script (test/fault/cell.ts) writes only whole execution records, even
 * when the stop of its process group lands while one of its `date` commands runs (that `date`
 * dies with the group and prints nothing). A `date` on the PATH that sends SIGTERM to its own
 * group on its n-th call puts the stop at each `date` of the script in turn; the records must
 * parse (test/support/fault-checker.ts parseRecords) with no malformed line, and every run that
 * started must have ended with a time.
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRecords } from '../support/fault-checker.ts';
import { TASK_SCRIPT } from './cell.ts';

const dir = mkdtempSync(join(tmpdir(), 'tarcil-task-script-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Counts its calls; on the call numbered $KILL_AT it signals its whole process group, itself included. */
const FAKE_DATE = `#!/bin/sh
n=$(( $(cat "$DATE_CALLS" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$DATE_CALLS"
if [ "$n" = "$KILL_AT" ]; then kill -TERM 0; sleep 1; fi
exec /bin/date "$@"
`;

/** Runs the task script for `seconds` in a process group of its own, as the process executor does. */
function runTask(killAt: number, seconds: string): Promise<{ records: string; calls: number }> {
  const node = join(dir, `k${killAt}`, 'n0');
  const bin = join(dir, `k${killAt}`, 'bin');
  mkdirSync(node, { recursive: true });
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'date'), FAKE_DATE, { mode: 0o755 });
  const script = join(dir, 'task.sh');
  writeFileSync(script, TASK_SCRIPT, { mode: 0o755 });
  const records = join(dir, `k${killAt}`, 'records.log');
  const calls = join(dir, `k${killAt}`, 'calls');
  writeFileSync(records, '');
  // The script reads the RU record's revision from its stdout's file name, as the executor names it.
  const out = openSync(join(dir, `k${killAt}`, '0-7.stdout'), 'a');
  return new Promise((resolve, reject) => {
    const child = spawn(script, [seconds], {
      cwd: node,
      detached: true,
      stdio: ['ignore', out, 'ignore'],
      env: {
        PATH: `${bin}:${process.env.PATH ?? ''}`,
        FAULT_RECORDS: records,
        DATE_CALLS: calls,
        KILL_AT: String(killAt),
        TARCIL_JOB: 'j1',
        TARCIL_TASK: '0',
        TARCIL_RU: '2',
      },
    });
    closeSync(out);
    child.once('error', reject);
    child.once('exit', () => resolve({ records: readFileSync(records, 'utf8'), calls: Number(readFileSync(calls, 'utf8').trim()) }));
  });
}

describe('the fault suite task script', () => {
  it('writes whole records whichever of its date commands a stop of its group interrupts', async () => {
    // Calls without a kill: the id's time, the end time. Then a stop at each call in turn, and past them.
    const calm = await runTask(0, '0.1');
    expect(parseRecords(calm.records, new Map())).toMatchObject({ malformed: [], runs: [{ job: 'j1', task: 0, node: 'n0', ru: 2, rev: 7, how: 'exit0' }] });
    for (let k = 1; k <= calm.calls + 1; k++) {
      const { records } = await runTask(k, '0.3');
      const { runs, malformed } = parseRecords(records, new Map());
      const why = `stop at date call ${k}:\n${records}`;
      expect(malformed, why).toEqual([]);
      // A stop before the trap is set ends the shell with no record; after it, the run ends with a time.
      for (const r of runs) {
        expect(r.how, why).not.toBe('open');
        expect(r.start, why).toBeGreaterThan(1_600_000_000_000);
        expect(r.end ?? 0, why).toBeGreaterThanOrEqual(r.start);
      }
      if (k > 1) expect(runs, why).toHaveLength(1);
    }
  }, 60_000);
});
