#!/usr/bin/env node
// Entry point of the `tarcil` command: TypeScript sources run through tsx's loader, so the
// package works from a fresh clone with no build step.
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
