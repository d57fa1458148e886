import type { TestProject } from 'vitest/node';
import { ensureChromium } from '../support/chromium.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The Chromium binary for the browser tests ('' when there is none: they are skipped). */
    chromium: string;
  }
}

/**
 * Chromium for the browser tests (test/frontend/dashboard-browser.test.ts): found, or installed
 * from Debian like etcd. Without it the browser tests are skipped, and this says so loudly.
 */
export default function setup(project: TestProject): void {
  const say = (m: string): void => {
    process.stdout.write(`[test setup] ${m}\n`);
  };
  const bin = ensureChromium(say);
  if (bin) say(`chromium for the browser tests: ${bin}`);
  else {
    say('!!! NO CHROMIUM: it is not installed and could not be installed (apt-get install chromium, or set CHROMIUM_BIN).');
    say('!!! THE BROWSER TESTS OF THE DASHBOARD ARE SKIPPED.');
  }
  project.provide('chromium', bin ?? '');
}
