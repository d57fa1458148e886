/**
 * Executors of a node: the simulated one (a timer, slowed by the ground-truth interference model)
 * and the process one (argv pinned to the RU's core, logs per task, CPU-time rate). One import
 * point for the interface (executor-types.ts) and both executors.
 */
export type { Executor, HeldOnDisk, PreviousRun, SuccessReport, TaskExit, TaskHandle, TaskLaunch } from './executor-types.ts';
export { SimulatedExecutor } from './simulated-executor.ts';
export { FENCED_EXIT, ProcessExecutor, supervisorScript, type ProcessExecutorOptions } from './process-executor.ts';
export { hasTaskset } from './process-util.ts';
