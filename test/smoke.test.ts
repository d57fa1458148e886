import { describe, expect, it, inject } from 'vitest';

describe('test setup', () => {
  it('provides a healthy private etcd', async () => {
    const endpoint = inject('etcdEndpoint');
    const res = await fetch(`${endpoint}/health`);
    expect(res.ok).toBe(true);
  });
});
