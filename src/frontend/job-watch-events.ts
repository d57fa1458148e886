/**
 * The shared parts of WatchJob streams (job-watch.ts): their limits (JobWatchLimits) and pacing
 * constants, the block layout of a snapshot's task reads, and a JobEvent encoded once
 * (EncodedJobEvent) for every stream of a generation to write.
 */
import type protobuf from 'protobufjs';
import { blockPrefix, TASK_BLOCK } from '../state/task-chunks.ts';
import type { WatchBatch } from '../store/types.ts';
import type { TarcilError } from '../util/errors.ts';
import type { JobEvent, JobEvent__Output } from '../rpc/gen/tarcil/v1/JobEvent.ts';
import { ENCODED, type PreEncoded } from '../rpc/pre-encoded.ts';
import { STREAM_LIMIT_DEFAULTS } from './options.ts';
import { LOADER_OPTIONS, protoRoot } from '../rpc/proto-root.ts';

export interface JobWatchLimits {
  /** Tasks per message (default 1000: a message stays well under gRPC's 4 MiB default). */
  tasksPerEvent: number;
  /** Bytes one stream may have written and not yet sent to its client before it waits. */
  streamQueueBytes: number;
  /** The same, for all the streams of the process together. */
  totalQueueBytes: number;
  /** A stream whose client takes nothing of what it was sent for this long is dropped. */
  slowConsumerMs: number;
  /** A stream this many bytes behind its job's newest event starts over with a fresh snapshot. */
  maxBehindBytes: number;
  /** WatchJob streams the process serves at once. */
  maxWatches: number;
  /** WatchJob streams of one job the process serves at once. */
  maxWatchesPerJob: number;
  /** WatchJob streams one connection may have open at once. */
  maxWatchesPerConnection: number;
}

/**
 * Task indexes read per store read of a snapshot. Task keys end in the index padded with zeros,
 * so a block's keys share a prefix (see blockPrefix).
 */
export const SNAPSHOT_BLOCK = TASK_BLOCK;

export { blockPrefix };

/** The pause before a job is sent again after a late change, and between its reads. */
export const LATE_REREAD_MS = 50;

/** Changes applied per turn when a snapshot's queued changes are caught up. */
export const EARLY_SLICE = 1000;

/** Streams are given their events for this long per turn of the event loop, then the loop turns. */
export const PUMP_SLICE_MS = 8;

/** A generation looks for streams it can forget events for (or that fell behind) after this many more bytes. */
export const TRIM_EVERY_BYTES = 1 << 20;

const D = STREAM_LIMIT_DEFAULTS;

/** The defaults (all but tasksPerEvent from frontend/options.ts, where the flags read them). */
export const DEFAULT_JOB_WATCH_LIMITS: JobWatchLimits = {
  tasksPerEvent: 1000,
  streamQueueBytes: D.streamQueueBytes,
  totalQueueBytes: D.totalQueueBytes,
  slowConsumerMs: D.slowConsumerMs,
  maxBehindBytes: D.maxBehindBytes,
  maxWatches: D.maxWatches,
  maxWatchesPerJob: D.maxWatchesPerJob,
  maxWatchesPerConnection: D.maxWatchesPerConnection,
};

// ---------------------------------------------------------------------------------------------
// Events encoded once.

let eventType: protobuf.Type | undefined;
const { includeDirs: _dirs, ...CONVERT } = LOADER_OPTIONS;

function jobEventType(): protobuf.Type {
  return (eventType ??= protoRoot().lookupType('tarcil.v1.JobEvent'));
}

/** A JobEvent as the bytes every stream of a generation writes; its fields decode them when read. */
export class EncodedJobEvent implements PreEncoded {
  readonly [ENCODED]: Buffer;
  private decoded: JobEvent__Output | undefined;

  constructor(bytes: Buffer) {
    this[ENCODED] = bytes;
  }

  /**
   * Has protobufjs make the encoders of JobEvent and of every message type under it (each type's
   * code is generated on its first use, some 25 ms in all with the proto's resolution) before the
   * first watcher comes, not in the turn that makes the first event.
   */
  static warm(): void {
    const seen = new Set<protobuf.Type>();
    const visit = (t: protobuf.Type): void => {
      if (seen.has(t)) return;
      seen.add(t);
      t.setup();
      for (const f of t.fieldsArray) {
        const r = f.resolve().resolvedType;
        if (r && 'fieldsArray' in r) visit(r);
      }
    };
    visit(jobEventType());
  }

  static encode(ev: JobEvent): EncodedJobEvent {
    const t = jobEventType();
    const b = t.encode(t.fromObject(ev)).finish();
    return new EncodedJobEvent(Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  }

  private get event(): JobEvent__Output {
    const t = jobEventType();
    return (this.decoded ??= t.toObject(t.decode(this[ENCODED]), CONVERT) as JobEvent__Output);
  }

  get job(): JobEvent__Output['job'] {
    return this.event.job;
  }
  get revision(): number {
    return this.event.revision;
  }
  get tasks(): JobEvent__Output['tasks'] {
    return this.event.tasks;
  }
  get more(): boolean {
    return this.event.more;
  }
}

export interface Frame {
  ev: EncodedJobEvent;
  size: number;
  revision: number;
  more: boolean;
  /** The job is final in this event: a stream ends after its last part. */
  final: boolean;
  /** Bytes of the generation's events before this one. */
  offset: number;
}

export type Listener = { onBatch(b: WatchBatch): void; onError(err: TarcilError): void };
