/**
 * The `tarcil` command line's entry in the compiled tree and from the sources (program.ts holds the
 * program); the build's bundle of the quick paths exports the same runCli (scripts/build-cli.mjs).
 */
import { runCli } from './program.ts';

await runCli(process.argv);
