/**
 * W2's input data: where the replicas of each block live, and the server attributes that hold a
 * first-stage task to the machines holding its input (Tarcil §6.2.1: "We constrain tasks in the
 * first stage of each query to the machines holding their input data (3-way replication)").
 *
 * Two placements of the replicas:
 * - 'random' (the default): HDFS's default block placement, each block on its own three servers
 *   (the first anywhere, the second on another rack, the third on the second's rack), so that a
 *   server shares its blocks with many different partners. Every server holding a block carries
 *   the attribute `block:<k>`.
 * - 'copysets': fixed triplets of servers, every block on one of them (copyset replication), each
 *   server carrying the attribute `copyset` = its triplet. A triplet is then an island: all the
 *   scans of its blocks must run on its three servers, whatever their size (an ablation).
 */
import type { JobSpec, ServerSpec } from '../model/types.ts';
import { SeededRng } from '../util/rng.ts';
import { COPYSET_ATTR } from './constants.ts';

export type Replication = 'random' | 'copysets';

/** Attribute key prefix of a block held by a server ('random' replication). */
export const BLOCK_ATTR_PREFIX = 'block:';
/** HDFS's 3-way replication (Tarcil §6.2.1). */
export const REPLICAS = 3;
/** Seed of the (fixed) assignment of replicas to servers. */
const PLACEMENT_SEED = 0x3c0;

export interface DataLayout {
  servers: ServerSpec[];
  /** Each block's replica servers (indices into `servers`). */
  blocks: number[][];
}

/**
 * Places `nBlocks` blocks of input on `base` ('random'), or divides the servers into triplets,
 * one block per triplet ('copysets'; nBlocks is then the number of triplets), and names each
 * server's blocks in its attributes.
 */
export function placeReplicas(base: readonly ServerSpec[], replication: Replication, nBlocks: number): DataLayout {
  const rng = new SeededRng(PLACEMENT_SEED);
  if (replication === 'copysets') {
    // Triplets are drawn by a fixed shuffle, not taken in server order: on the heterogeneous
    // cluster that would put all replicas of a block on three servers of one (possibly small) type.
    const order = base.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [order[i], order[j]] = [order[j] as number, order[i] as number];
    }
    // A server left over after the last full triplet holds no input data.
    const sets = Math.floor(base.length / REPLICAS);
    const setOf = new Array<number>(base.length).fill(-1);
    order.forEach((srv, k) => {
      if (k < sets * REPLICAS) setOf[srv] = Math.floor(k / REPLICAS);
    });
    const servers = base.map((s, i) => ((setOf[i] as number) < 0 ? s : { ...s, attributes: { ...s.attributes, [COPYSET_ATTR]: String(setOf[i]) } }));
    const blocks: number[][] = Array.from({ length: sets }, () => []);
    setOf.forEach((g, srv) => {
      if (g >= 0) (blocks[g] as number[]).push(srv);
    });
    return { servers, blocks };
  }
  const all = base.map((_, i) => i);
  const pick = (xs: readonly number[]): number => xs[rng.int(xs.length)] as number;
  const attrs = base.map((s) => ({ ...s.attributes }));
  const blocks: number[][] = [];
  for (let k = 0; k < nBlocks; k++) {
    const first = rng.int(base.length);
    const rackOf = (i: number): string => (base[i] as ServerSpec).rack;
    // A server of another rack (any other server if there is one rack), then another server of
    // the second's rack (any other if it has none).
    const remote = all.filter((i) => rackOf(i) !== rackOf(first));
    const second = pick(remote.length > 0 ? remote : all.filter((i) => i !== first));
    const sameRack = all.filter((i) => i !== first && i !== second && rackOf(i) === rackOf(second));
    const third = pick(sameRack.length > 0 ? sameRack : all.filter((i) => i !== first && i !== second));
    const b = [first, second, third];
    blocks.push(b);
    for (const s of b) (attrs[s] as Record<string, string>)[`${BLOCK_ATTR_PREFIX}${k}`] = 'y';
  }
  return { servers: base.map((s, i) => ({ ...s, attributes: attrs[i] as Record<string, string> })), blocks };
}

/**
 * The attributes that hold a task to its replica servers: the copyset they share, or a block they
 * all hold; undefined when they share none (the replicas can then only be preferred).
 */
export function replicaAttributes(specs: readonly { attributes: Readonly<Record<string, string>> }[]): Record<string, string> | undefined {
  const first = specs[0];
  if (!first) return undefined;
  const set = first.attributes[COPYSET_ATTR];
  if (set !== undefined && specs.every((x) => x.attributes[COPYSET_ATTR] === set)) return { [COPYSET_ATTR]: set };
  for (const key of Object.keys(first.attributes)) {
    if (key.startsWith(BLOCK_ATTR_PREFIX) && specs.every((x) => x.attributes[key] !== undefined)) return { [key]: 'y' };
  }
  return undefined;
}

/**
 * Where a data-constrained task may go in a job spec: held to its replica servers when they are
 * named (a block or copyset), as the paper's TPC-H runs constrain first-stage tasks; otherwise,
 * or with `preferOnly` (an ablation), the replicas are only preferred (locality pack).
 */
export function dataPlacement(specs: readonly ServerSpec[] | undefined, preferOnly?: boolean): Pick<JobSpec, 'locality' | 'constraints'> {
  if (!specs) return { locality: { mode: 'any', scope: 'server' }, constraints: {} };
  const dataServers = specs.map((x) => x.id);
  const held = preferOnly ? undefined : replicaAttributes(specs);
  if (held) return { locality: { mode: 'any', scope: 'server' }, constraints: { attributes: held, dataServers } };
  return { locality: { mode: 'pack', scope: 'server' }, constraints: { dataServers } };
}
