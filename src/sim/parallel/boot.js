// Entry of a simulator worker thread: the compiled tree runs as it is; the TypeScript sources go
// through tsx, registered in this thread (a worker does not inherit the main thread's loader).
import { workerData } from 'node:worker_threads';

if (workerData.entry.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(workerData.entry);
