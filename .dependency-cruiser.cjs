/**
 * The dependency rules of tarcil's source tree, checked by `npm run deps` (part of `npm run lint`).
 * ARCHITECTURE.md explains them: the scheduling core knows nothing of how it is served (cli, the
 * gRPC plumbing rpc, the front-end frontend, the node side node) or simulated (sim); the gRPC
 * plumbing knows nothing of what it serves; the node side and the node monitor know nothing of
 * the agents or the front-end; src never reaches into tests or benchmarks; no cycles.
 *
 * dependency-cruiser is pinned to 17.4.3 in package.json: the 17 line is the last whose engines
 * allow Node 20 (^20.12), 18 needs Node 22.
 */
const CORE = '^src/(quality|sampling|admission|model|util|store|state|agent|owner|monitor|tenancy)/';

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'A cycle makes both modules one unit: split the shared part out.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'core-not-served-or-simulated',
      severity: 'error',
      comment:
        'The scheduling core is shared by the live agents and the simulator: it must not depend on the CLI, the gRPC plumbing, the front-end, the node side or the simulator.',
      from: { path: CORE },
      to: { path: '^src/(cli|rpc|frontend|node|sim)/' },
    },
    {
      name: 'rpc-is-plumbing',
      severity: 'error',
      comment:
        'src/rpc is the gRPC plumbing every tarcil server and client shares (front-ends, nodes, the CLI): it knows the store and the records it reports on (util, store, state) and nothing that serves through it.',
      from: { path: '^src/rpc/' },
      to: { path: '^src/', pathNot: '^src/(rpc|util|store|state)/' },
    },
    {
      name: 'node-not-frontend-or-agent',
      severity: 'error',
      comment:
        'The node side (src/node: the NodeMonitor service, node metrics, the wiring of a node and of tarcil hollow) serves the node monitor over src/rpc: it never imports the front-end, the agents, the CLI or the simulator.',
      from: { path: '^src/node/' },
      to: { path: '^src/(frontend|agent|owner|cli|sim)/' },
    },
    {
      name: 'monitor-not-agent',
      severity: 'error',
      comment: 'A node monitor talks to the store through src/state, never through the agents or the job owners.',
      from: { path: '^src/monitor/' },
      to: { path: '^src/(agent|owner)/' },
    },
    {
      name: 'agent-not-owner',
      severity: 'error',
      comment:
        'The scheduling agents place what a job owner asks them to (SchedulingAgent.schedule) and know nothing of owners: the owner (src/owner) uses the agents, never the other way.',
      from: { path: '^src/agent/' },
      to: { path: '^src/owner/' },
    },
    {
      name: 'src-not-tests-or-bench',
      severity: 'error',
      comment: 'Shipped code never imports tests or benchmarks.',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'no-unresolvable',
      severity: 'error',
      comment: 'An import that does not resolve is a broken build.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/rpc/gen/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
