// Copies the dashboard's browser libraries from node_modules into
// static/vendor and writes static/vendor/VERSIONS (file, package, version,
// sha256 of the committed file). Bare imports ("preact", ...) are rewritten
// to relative paths, because the page's CSP forbids an inline import map.
// Run: npm ci && npm run vendor
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";

const files = [
  // [package, path inside the package, file name in static/vendor]
  ["preact", "dist/preact.mjs", "preact.mjs"],
  ["preact", "hooks/dist/hooks.mjs", "preact-hooks.mjs"],
  ["htm", "dist/htm.mjs", "htm.mjs"],
  ["@preact/signals-core", "dist/signals-core.mjs", "signals-core.mjs"],
  ["@preact/signals", "dist/signals.mjs", "signals.mjs"],
  ["uplot", "dist/uPlot.esm.js", "uplot.mjs"],
  ["uplot", "dist/uPlot.min.css", "uplot.css"],
];

const rewrites = {
  "preact": "./preact.mjs",
  "preact/hooks": "./preact-hooks.mjs",
  "@preact/signals-core": "./signals-core.mjs",
};

const out = "static/vendor";
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const lines = ["# file\tpackage\tversion\tsha256 (of the file here)\tsource", ""];
for (const [pkg, src, dst] of files) {
  const dir = join("node_modules", pkg);
  const { version } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  let text = readFileSync(join(dir, src), "utf8");
  text = text.replace(/(from\s*|import\s*)(["'])([^"']+)\2/g, (m, kw, q, spec) =>
    spec in rewrites ? `${kw}${q}${rewrites[spec]}${q}` : m);
  text = text.replace(/\n?\/[/*][#@] sourceMappingURL=[^\n]*/g, "");
  const bare = [...text.matchAll(/\b(?:from|import)\s*["'](@?[a-z][^"'\s]*)["']/g)].map((m) => m[1]);
  if (bare.length) throw new Error(`${dst}: bare imports left: ${bare.join(", ")}`);
  writeFileSync(join(out, dst), text);
  const sum = createHash("sha256").update(text).digest("hex");
  lines[lines.length - 1] !== "" || lines.pop();
  lines.push(`${dst}\t${pkg}\t${version}\t${sum}\t${pkg}/${src}`);
}
writeFileSync(join(out, "VERSIONS"), lines.join("\n") + "\n");
console.log(`vendored ${files.length} files into ${out}`);
