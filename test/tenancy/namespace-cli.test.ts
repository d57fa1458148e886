/**
 * The command line's namespaces: `namespace create|set|delete`, `namespaces`, `-n` on submit,
 * jobs, status, explain and cancel, `jobs -A`; against a demo cell.
 */
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelCommand, explainCommand, jobsCommand, statusCommand, submitCommand } from '../../src/cli/client.ts';
import { namespaceDeleteCommand, namespacePutCommand, namespacesCommand } from '../../src/cli/namespace-commands.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { startDemoCell } from '../support/live.ts';
import { waitFinal } from '../support/live.ts';

let cell: Awaited<ReturnType<typeof startDemoCell>>;
let server = '';
const dir = mkdtempSync(join(tmpdir(), 'tarcil-ns-cli-'));
const specFile = (name: string, durationMs: number): string => {
  const f = join(dir, `${name}.json`);
  writeFileSync(f, JSON.stringify({ name, profile: 'spark-lr', tasks: 1, durationMs }));
  return f;
};

beforeAll(async () => {
  cell = await startDemoCell({ prefix: '/ns-cli/', name: 'nscli', seed: 4, agents: 1 });
  server = `127.0.0.1:${cell.sched.port}`;
});
afterAll(async () => {
  await cell?.close();
});

describe('namespaces on the command line', () => {
  it('creates a namespace, runs a job in it with -n, lists and scopes, refuses what it must', async () => {
    const lines: string[] = [];
    const out = (l: string): void => void lines.push(l);
    const o = { server, timeout: 5000 };
    await namespacePutCommand('create', 'team-a', { ...o, weight: 3, maxRus: 5 }, out);
    expect(lines.pop()).toBe('namespace team-a: weight 3, max RUs 5, max waiting jobs no limit');
    const again = await namespacePutCommand('create', 'team-a', o, out).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(TarcilError);
    expect((again as TarcilError).message).toBe('namespace team-a exists already (change it: tarcil namespace set team-a ...)');
    // set keeps what it is not given.
    await namespacePutCommand('set', 'team-a', { ...o, maxWaitingJobs: 7 }, out);
    expect(lines.pop()).toBe('namespace team-a: weight 3, max RUs 5, max waiting jobs 7');

    await submitCommand(specFile('quick', 50), { ...o, namespace: 'team-a', wait: false }, out);
    const id = /^submitted (team-a\/j-\S+)$/.exec(lines.pop() ?? '')?.[1];
    expect(id).toBeDefined();
    await waitFinal(cell.client, id!);
    const short = id!.slice('team-a/'.length);

    lines.length = 0;
    await statusCommand(short, { ...o, namespace: 'team-a', json: true }, out);
    expect(JSON.parse(lines.join('\n'))).toMatchObject({ id, namespace: 'team-a', state: 'succeeded' });
    lines.length = 0;
    await explainCommand(short, { ...o, namespace: 'team-a', output: 'json' }, out);
    expect(JSON.parse(lines.join('\n'))).toMatchObject({ jobId: id });

    lines.length = 0;
    await jobsCommand({ ...o, namespace: 'team-a', limit: 10 }, out);
    expect(lines.join('\n')).toContain(id);
    lines.length = 0;
    await jobsCommand({ ...o, limit: 10 }, out);
    expect(lines.join('\n')).not.toContain(id);
    lines.length = 0;
    await jobsCommand({ ...o, limit: 10, allNamespaces: true }, out);
    expect(lines.join('\n')).toContain(id);

    lines.length = 0;
    await namespacesCommand({ ...o, output: 'json' }, out);
    const list = JSON.parse(lines.join('\n')) as { namespaces: { name: string; weight: number; maxRus: number; jobs: Record<string, number> }[] };
    expect(list.namespaces.map((n) => n.name)).toEqual(['default', 'team-a']);
    expect(list.namespaces[1]).toMatchObject({ weight: 3, maxRus: 5, jobs: { succeeded: 1 } });

    // A cancel of the short id without -n looks in default: not found.
    const wrong = await cancelCommand(short, o, out).catch((e: unknown) => e);
    expect((wrong as TarcilError).code).toBe('NOT_FOUND');
    const held = await namespaceDeleteCommand('team-a', o, out).catch((e: unknown) => e);
    expect((held as TarcilError).code).toBe('FAILED_PRECONDITION');
    await namespacePutCommand('create', 'scratch', o, out);
    await namespaceDeleteCommand('scratch', o, out);
    expect(lines.pop()).toBe('namespace scratch deleted');
  });
});
