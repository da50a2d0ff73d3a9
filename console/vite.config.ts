import { defineConfig } from 'vite';

// The console is served by `toolgraph serve` itself (assets embedded in the binary): no CDN,
// no external font or script; hashed file names under /assets/.
export default defineConfig({
  base: '/',
  build: { outDir: 'dist', assetsDir: 'assets', sourcemap: false, emptyOutDir: true, chunkSizeWarningLimit: 1200 },
  server: { proxy: { '/v1': 'http://127.0.0.1:8080', '/openapi.json': 'http://127.0.0.1:8080' } },
});
