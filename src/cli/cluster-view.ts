/**
 * What `tarcil cluster` prints: by default a summary by platform and by rack (a 10,000-server
 * cell prints a few dozen lines, not a line per server or per RU); with `--servers`, the servers
 * themselves, filtered (`--platform`, `--rack`, `--state`) and cut at `--limit`. `-o wide` adds
 * columns (and every rack to the summary); `-o json|yaml` prints the Cluster message, its servers
 * filtered and limited the same way.
 */
import Table from 'cli-table3';
import type { Cluster__Output } from '../rpc/gen/tarcil/v1/Cluster.ts';
import type { Server__Output } from '../rpc/gen/tarcil/v1/Server.ts';
import { tableStyle } from './color.ts';
import { nodeNotes } from './node-commands.ts';

export interface ServerFilter {
  platform?: string[];
  rack?: string[];
  state?: string[];
  /** At most this many servers (0 or undefined: all). */
  limit?: number;
}

/** The servers that pass the filter, in the front-end's order, at most `limit` of them; and how many passed in all. */
export function filterServers(servers: readonly Server__Output[], f: ServerFilter): { servers: Server__Output[]; matched: number } {
  const has = (list: string[] | undefined, v: string): boolean => list === undefined || list.length === 0 || list.includes(v);
  const matched = servers.filter((s) => has(f.platform, s.platform) && has(f.rack, s.rack) && has(f.state, s.state));
  return { servers: f.limit ? matched.slice(0, f.limit) : matched, matched: matched.length };
}

/** The filter's flags, as the command line wrote them (for a note). */
export const filtered = (f: ServerFilter): boolean => [f.platform, f.rack, f.state].some((l) => l !== undefined && l.length > 0);

/**
 * A group's counts. Every server is up or down (blocked, cordoned, draining and drained servers
 * are up: they run their tasks, but take no new placements); every RU is free (on a server that
 * takes placements), busy, reserved, unschedulable (free, on a server that takes none) or down. So
 * up + down = servers and free + busy + reserved + unschedulable + rusDown = rus, in every view.
 */
interface Group {
  servers: number;
  up: number;
  blocked: number;
  cordoned: number;
  down: number;
  rus: number;
  free: number;
  busy: number;
  reserved: number;
  unschedulable: number;
  rusDown: number;
  platforms: Set<string>;
  racks: Set<string>;
}

function group(servers: readonly Server__Output[], key: (s: Server__Output) => string): Map<string, Group> {
  const groups = new Map<string, Group>();
  for (const s of servers) {
    const k = key(s);
    let g = groups.get(k);
    if (!g)
      groups.set(
        k,
        (g = {
          servers: 0,
          up: 0,
          blocked: 0,
          cordoned: 0,
          down: 0,
          rus: 0,
          free: 0,
          busy: 0,
          reserved: 0,
          unschedulable: 0,
          rusDown: 0,
          platforms: new Set(),
          racks: new Set(),
        }),
      );
    g.servers++;
    if (s.state === 'down') g.down++;
    else g.up++;
    if (s.state === 'blocked') g.blocked++;
    else if (s.state !== 'up' && s.state !== 'down') g.cordoned++; // cordoned, draining, drained
    g.platforms.add(s.platform);
    g.racks.add(s.rack);
    for (const r of s.rus) {
      g.rus++;
      if (r.state === 'free') {
        if (s.state === 'up') g.free++;
        else g.unschedulable++;
      } else if (r.state === 'busy') g.busy++;
      else if (r.state === 'reserved') g.reserved++;
      else g.rusDown++;
    }
  }
  return new Map([...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Racks listed one per row in the summary's table (all of them with -o wide). */
export const SUMMARY_RACKS = 20;
/** Node notes (cordoned, draining, left) printed under the summary. */
const SUMMARY_NOTES = 10;

const pct = (part: number, whole: number): string => (whole === 0 ? '-' : `${Math.round((100 * part) / whole)}%`);

/** The summary: by platform, by rack, the totals, the node notes, the admission buckets. */
export function clusterSummary(cl: Cluster__Output, wide: boolean): string[] {
  const lines: string[] = [];
  const byPlatform = group(cl.servers, (s) => s.platform);
  const head = ['servers', 'up', 'down', 'RUs', 'free', 'busy', 'reserved', 'unschedulable', 'RUs down'];
  const wideHead = ['blocked', 'cordoned', 'free %'];
  const row = (g: Group): (string | number)[] => [g.servers, g.up, g.down, g.rus, g.free, g.busy, g.reserved, g.unschedulable, g.rusDown];
  const wideRow = (g: Group): (string | number)[] => [g.blocked, g.cordoned, pct(g.free, g.rus)];
  const p = new Table({ style: tableStyle(), head: ['platform', ...head, 'racks', ...(wide ? wideHead : [])] });
  for (const [k, g] of byPlatform) p.push([k, ...row(g), g.racks.size, ...(wide ? wideRow(g) : [])]);
  lines.push(p.toString());

  const byRack = group(cl.servers, (s) => s.rack);
  if (wide || byRack.size <= SUMMARY_RACKS) {
    const r = new Table({ style: tableStyle(), head: ['rack', ...head, 'platforms', ...(wide ? wideHead : [])] });
    for (const [k, g] of byRack) r.push([k, ...row(g), [...g.platforms].sort().join(','), ...(wide ? wideRow(g) : [])]);
    lines.push(r.toString());
  } else {
    const free = [...byRack.values()].map((g) => g.free).sort((a, b) => a - b);
    const notUp = [...byRack].filter(([, g]) => g.down > 0);
    lines.push(
      `${byRack.size} racks: free RUs per rack min ${free[0]}, median ${free[Math.floor(free.length / 2)]}, max ${free[free.length - 1]}; ` +
        `${notUp.length} with a server down${
          notUp.length > 0
            ? ` (${notUp
                .slice(0, 8)
                .map(([k, g]) => `${k}: ${g.down}`)
                .join(', ')}${notUp.length > 8 ? ', …' : ''})`
            : ''
        } ` +
        '(-o wide lists every rack, --servers --rack R its servers)',
    );
  }
  lines.push(totals(cl));
  const blocked = cl.servers.filter((s) => s.state === 'blocked');
  if (blocked.length > 0) {
    const names =
      blocked
        .slice(0, 8)
        .map((s) => s.id)
        .join(', ') + (blocked.length > 8 ? ', …' : '');
    lines.push(
      `${blocked.length} server${blocked.length === 1 ? '' : 's'} blocked (${names}): a task there runs well below its expected rate; no new task is placed there until it recovers or the block times out (the tasks running there go on)`,
    );
  }
  const notes = nodeNotes(cl.servers);
  lines.push(...notes.slice(0, wide ? notes.length : SUMMARY_NOTES));
  if (!wide && notes.length > SUMMARY_NOTES) lines.push(`… and ${notes.length - SUMMARY_NOTES} more node notes (-o wide lists them all)`);
  lines.push(...buckets(cl));
  return lines;
}

function totals(cl: Cluster__Output): string {
  const unsched = cl.unschedulable > 0 ? `, ${cl.unschedulable} unschedulable (free, on servers that take no new placements)` : '';
  return `${cl.servers.length} servers, ${cl.rus} RUs: ${cl.free} free, ${cl.busy} busy${unsched}, ${cl.down} down; ${cl.activeJobs} active jobs, ${cl.queuedJobs} waiting`;
}

function buckets(cl: Cluster__Output): string[] {
  const b = cl.buckets.filter((x) => x.rus > 0);
  return b.length > 0 ? [`admission buckets (free/RUs): ${b.map((x) => `#${x.id} ${x.free}/${x.rus}`).join('  ')}`] : [];
}

const RU_MAP_LEGEND = 'RUs (. free, # busy, r reserved, x down)';
const ruMap = (s: Server__Output): string =>
  s.rus.map((r) => (r.state === 'free' ? '.' : r.state === 'busy' ? '#' : r.state === 'reserved' ? 'r' : 'x')).join('');

/** `--servers`: a row per server (the filtered, limited list), then what was left out and the totals. */
export function serverList(cl: Cluster__Output, f: ServerFilter, wide: boolean): string[] {
  const { servers, matched } = filterServers(cl.servers, f);
  const t = new Table({
    style: tableStyle(),
    head: ['server', 'platform', 'rack', 'state', 'free', 'busy', RU_MAP_LEGEND, ...(wide ? ['endpoint', 'reason', 'left at'] : [])],
  });
  for (const s of servers) {
    t.push([
      s.id,
      s.platform,
      s.rack,
      s.state,
      s.free,
      s.busy,
      ruMap(s),
      ...(wide ? [s.endpoint, s.cordonReason, s.leftAtMs > 0 ? new Date(s.leftAtMs).toISOString() : ''] : []),
    ]);
  }
  const lines = [servers.length === 0 ? `no servers${filtered(f) ? ' match the filter' : ''}` : t.toString()];
  if (matched > servers.length) lines.push(`${matched - servers.length} more server(s) not listed (--limit ${f.limit}; --limit 0 lists them all)`);
  if (filtered(f)) lines.push(`${matched} of ${cl.servers.length} servers match the filter`);
  lines.push(totals(cl));
  lines.push(...nodeNotes(servers));
  return lines;
}
