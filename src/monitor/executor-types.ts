/**
 * The executor interface of a node: what a task attempt needs to start (TaskLaunch), what it
 * reports (TaskExit, SuccessReport, HeldOnDisk), and the handle and executor contracts.
 */
import type { DirectStoreAccess } from '../store/types.ts';

/** What an executor needs to run one task attempt. */
export interface TaskLaunch {
  job: string;
  task: number;
  ruIndex: number;
  /** RU record revision of this attempt: names its log files. */
  revision: number;
  /** The node the task runs on, and the attempt (0 for the task's first placement). */
  server?: string;
  attempt?: number;
  /** Ideal duration (simulated executor). */
  durationMs?: number;
  command?: { argv: string[]; env?: Record<string, string> };
  /**
   * How the task's supervisor writes a success itself when the monitor cannot (process executor,
   * etcd store; see supervisor.js): the store, the RU record and the revision the attempt holds
   * it at (the fence), the task record to write with the end time filled in, and the free RU.
   */
  report?: SuccessReport;
  /**
   * The attempt as the monitor knows it, kept beside the task's logs (`<base>.attempt`) until its
   * outcome is in the store: a monitor started again after the task was placed elsewhere reports
   * a success it finds there (leftSuccesses).
   */
  held?: HeldOnDisk;
}

/** What `<base>.attempt` holds (outcomes.ts HeldAttempt and the start time). */
export interface HeldOnDisk {
  job: string;
  task: number;
  commitId: string;
  ruIndex: number;
  rec: Record<string, unknown>;
  placedRevision: number;
  startedAt: number;
}

export interface SuccessReport {
  store: DirectStoreAccess;
  ruKey: string;
  rev: number;
  taskKey: string;
  /** The task record of the success, `endedAt` filled in when written. */
  record: Record<string, unknown>;
  freeValue: string;
}

export interface TaskExit {
  /** lost: its supervisor stopped it at the node's deadline (the monitor had not been heard from). */
  state: 'succeeded' | 'failed' | 'lost';
  exitCode?: number;
  message?: string;
}

export interface TaskHandle {
  readonly pid?: number;
  readonly logPath?: string;
  /** Achieved rate relative to the expected one (1 = as expected); 1 when unknown. */
  rate(): number;
  /** Interference slowdown of the task's server changed (simulated executor). */
  setSlowdown(s: number): void;
  /** Stops the task; resolves when it has stopped. onExit is not called after kill(). */
  kill(): Promise<void>;
  /** The RU record holds the attempt at a new revision (adopted under a new lease): the supervisor's fence. */
  setRevision?(rev: number): void;
}

export interface Executor {
  readonly kind: 'simulated' | 'process';
  /** Tasks' rates are measured (or modelled): the monitor may learn from them (state/profiles.ts). */
  readonly measuresRate?: boolean;
  /** Where the executor writes task logs, if it does (the monitor's default journal lives there). */
  readonly logDir?: string;
  start(t: TaskLaunch, onExit: (e: TaskExit) => void): TaskHandle;
  /** What a previous life of this node's monitor left of an attempt (process executor). */
  previousRun?(t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>): PreviousRun;
  /**
   * Attempts of `server` that a previous life of this node's monitor started and that still run
   * (their process group alive, its environment naming the attempt), whatever the store says of
   * them now (process executor).
   */
  leftRunning?(server: string): LeftRunning[];
  /** Stops an attempt a previous life left running; its exit record if it ended by itself first. */
  stopOrphan?(t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>, pid: number): Promise<TaskExit | undefined>;
  /**
   * The node's deadline (see state/node-fence.ts), as milliseconds from now: the tasks' supervisors
   * stop them once it has passed unless it is moved on (process executor).
   */
  setDeadline?(server: string, inMs: number, lease?: string): void;
  /**
   * Attempts whose task exited 0 and whose outcome the store may not have (their `<base>.attempt`
   * is still there), with the time the exit was recorded (process executor).
   */
  leftSuccesses?(): Array<{ held: HeldOnDisk; logPath: string; endedAt: number }>;
  /** The store has the outcome of the attempt logging at `logPath`: forget it. */
  attemptReported?(logPath: string): void;
}

/** An attempt a previous life of the monitor left running (ProcessExecutor.leftRunning). */
export interface LeftRunning {
  job: string;
  task: number;
  revision: number;
  /** Its process group's id. */
  pid: number;
}

/** What a monitor's previous life left of one task attempt (ProcessExecutor.previousRun). */
export type PreviousRun =
  | { kind: 'exited'; exit: TaskExit }
  /** Still running, in a process group the monitor no longer supervises. */
  | { kind: 'running'; pid: number }
  | { kind: 'unknown' };
