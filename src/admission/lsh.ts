/**
 * Locality-sensitive hashing of RU contention vectors [C_1..C_N] (values 0..99) into a few buckets
 * (Tarcil §4), so that admission control can keep one free counter per bucket instead of looking at
 * every RU.
 *
 * The paper hashes by cosine distance (random hyperplanes through the origin). Two problems with
 * using that alone here:
 *
 * 1. Cosine ignores magnitude. An almost idle server and a saturated one whose contention points the
 *    same way land in the same bucket, and the bucket's mean then says nothing about whether its RUs
 *    are acceptable — which is the one question admission asks.
 * 2. Every contention vector lies in the positive orthant. Random hyperplanes through the origin
 *    mostly leave that orthant whole on one side, so most of the sign bits are constant.
 *
 * So a bucket is (direction cell, magnitude band):
 *
 * - Direction: `directionBits` hyperplanes through the origin that *contain* a typical contention
 *   direction (the `centre`, by default the diagonal: equal contention everywhere). Each normal is
 *   a seeded Gaussian vector projected orthogonal to the centre (and to the previous normals, so
 *   the cells are balanced). Because every plane passes through the middle of the populated cone,
 *   each one splits it roughly in half, and sign(w·C) is still scale-invariant: a pure direction
 *   signature, which is what cosine LSH measures, only aimed where the data is.
 * - Magnitude: the RMS of C, √(ΣC_i²/N) ∈ [0, 99], cut into `bands` bands. Default edges are
 *   quadratic, 99·(k/bands)², i.e. 4, 16, 36, 63 for 5 bands: finest at low contention, where the
 *   acceptability of demanding jobs (whose tolerance 99 − c is small) is decided.
 *
 * Together direction and norm determine the vector, so RUs sharing a bucket have similar vectors on
 * every resource. bucket = band · 2^directionBits + cell; by default 2 bits × 5 bands = 20 buckets,
 * the paper's count. For another `buckets`, the default uses up to 2 direction bits (the largest
 * power of two ≤ 4 dividing it) and the rest as bands; both can be set explicitly.
 */
import { invalid } from '../util/errors.ts';
import { SeededRng, type Rng } from '../util/rng.ts';
import { N_RESOURCES } from '../model/types.ts';

export const DEFAULT_BUCKETS = 20;

export interface LshOptions {
  /** Total number of buckets (default 20, paper §4). Must equal 2^directionBits × bands. */
  buckets?: number;
  /** Hyperplanes for the direction signature (2^bits cells). Default: see the module comment. */
  directionBits?: number;
  /** Ascending RMS edges between magnitude bands (bands − 1 of them). Default quadratic. */
  bandEdges?: number[];
  /** Seed for the hyperplanes: every agent and the simulator hash alike given the same seed. */
  seed?: number;
  /** Vector length (default N = 10). */
  dims?: number;
  /** The typical contention vector the planes pass through (default: the diagonal). */
  centre?: number[];
}

export interface BucketInfo {
  bucket: number;
  /** Magnitude band, 0 = least contended. */
  band: number;
  /** Direction cell, 0..2^directionBits − 1. */
  cell: number;
  /** RMS range of the band, [lo, hi). */
  rms: [number, number];
}

function gaussian(rng: Rng): number {
  // Box–Muller; 1 − next() is in (0, 1], so the log is finite.
  const u = 1 - rng.next();
  const v = rng.next();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

function dot(a: ArrayLike<number>, b: ArrayLike<number>, n: number): number {
  let s = 0;
  for (let i = 0; i < n; i++) s += (a[i] as number) * (b[i] as number);
  return s;
}

export class ContentionLsh {
  readonly buckets: number;
  readonly directionBits: number;
  readonly cells: number;
  readonly bands: number;
  readonly dims: number;
  readonly bandEdges: readonly number[];
  /** Hyperplane normals, row-major: directionBits × dims. */
  private readonly normals: Float64Array;

  constructor(opts: LshOptions = {}) {
    const buckets = opts.buckets ?? DEFAULT_BUCKETS;
    if (!Number.isInteger(buckets) || buckets < 1 || buckets > 4096) {
      throw invalid('buckets', 'must be an integer in [1, 4096]', { value: buckets });
    }
    const dims = opts.dims ?? N_RESOURCES;
    if (!Number.isInteger(dims) || dims < 1) throw invalid('dims', 'must be a positive integer', { value: dims });

    let bits = opts.directionBits;
    if (bits === undefined) {
      bits = 0;
      while (bits < 2 && buckets % 2 ** (bits + 1) === 0) bits++;
    }
    // A plane must contain the centre and stay independent of the others: at most dims − 1 of them.
    if (!Number.isInteger(bits) || bits < 0 || bits > dims - 1 || buckets % 2 ** bits !== 0) {
      throw invalid('directionBits', `must be an integer in [0, ${dims - 1}] with 2^bits dividing buckets`, {
        value: bits,
        buckets,
      });
    }
    const cells = 2 ** bits;
    const bands = buckets / cells;

    let edges = opts.bandEdges;
    if (edges === undefined) {
      edges = Array.from({ length: bands - 1 }, (_, k) => 99 * ((k + 1) / bands) ** 2);
    } else if (edges.length !== bands - 1 || edges.some((e, i) => !Number.isFinite(e) || (i > 0 && e <= (edges?.[i - 1] ?? 0)))) {
      throw invalid('bandEdges', `must be ${bands - 1} strictly ascending finite numbers`, { value: edges });
    }

    const centre = opts.centre ?? new Array<number>(dims).fill(1);
    const cNorm = Math.sqrt(dot(centre, centre, dims));
    if (centre.length !== dims || !(cNorm > 0) || centre.some((v) => !(v >= 0))) {
      throw invalid('centre', `must be ${dims} non-negative numbers, not all zero`);
    }

    // Gram–Schmidt against the centre and the earlier normals; redraw the (measure-zero) case of a
    // draw that is almost in their span.
    const rng = new SeededRng(opts.seed ?? 0x7a2c11);
    const basis: Float64Array[] = [Float64Array.from(centre, (v) => v / cNorm)];
    const normals = new Float64Array(bits * dims);
    for (let b = 0; b < bits; b++) {
      for (;;) {
        const w = Float64Array.from({ length: dims }, () => gaussian(rng));
        for (const u of basis) {
          const p = dot(w, u, dims);
          for (let i = 0; i < dims; i++) w[i] = (w[i] as number) - p * (u[i] as number);
        }
        const norm = Math.sqrt(dot(w, w, dims));
        if (norm < 1e-6) continue;
        for (let i = 0; i < dims; i++) w[i] = (w[i] as number) / norm;
        basis.push(w);
        normals.set(w, b * dims);
        break;
      }
    }

    this.buckets = buckets;
    this.directionBits = bits;
    this.cells = cells;
    this.bands = bands;
    this.dims = dims;
    this.bandEdges = Object.freeze([...edges]);
    this.normals = normals;
  }

  /**
   * The bucket of a contention vector: O(dims · (directionBits + 1) + bands), no allocation. It runs
   * whenever an RU's neighbourhood changes.
   */
  bucketOf(C: readonly number[] | ArrayLike<number>): number {
    const dims = this.dims;
    let ss = 0;
    for (let i = 0; i < dims; i++) {
      const v = C[i] ?? 0;
      ss += v * v;
    }
    const rms = Math.sqrt(ss / dims);
    const edges = this.bandEdges;
    let band = 0;
    while (band < edges.length && rms >= (edges[band] as number)) band++;

    let cell = 0;
    const w = this.normals;
    for (let b = 0; b < this.directionBits; b++) {
      let s = 0;
      const off = b * dims;
      for (let i = 0; i < dims; i++) s += (w[off + i] as number) * (C[i] ?? 0);
      // The zero vector (and anything exactly on a plane) goes to the positive side: deterministic.
      if (s >= 0) cell |= 1 << b;
    }
    return band * this.cells + cell;
  }

  describe(bucket: number): BucketInfo {
    if (!Number.isInteger(bucket) || bucket < 0 || bucket >= this.buckets) {
      throw invalid('bucket', `must be an integer in [0, ${this.buckets})`, { value: bucket });
    }
    const band = Math.floor(bucket / this.cells);
    const lo = band === 0 ? 0 : (this.bandEdges[band - 1] as number);
    const hi = band === this.bands - 1 ? Infinity : (this.bandEdges[band] as number);
    return { bucket, band, cell: bucket % this.cells, rms: [lo, hi] };
  }
}
