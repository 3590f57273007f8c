// Builds dist/: index.html, app.js (one minified ES module bundle), app.css, favicon.svg.
// Fixed names, no timestamps, no source maps: the same sources give the same bytes, so CI
// rebuilds it and checks `git diff --exit-code console/dist`.

import { build } from "esbuild";
import { mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { dirname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(fileURLToPath(import.meta.url));
const src = join(root, "src");
const dist = join(root, "dist");

await mkdir(dist, { recursive: true });

// The console speaks gRPC-Web in the binary format only, so protobuf's JSON codec is never
// called; leaving it out (through the transport's optional JSON serializer) keeps ~34 KB
// off the bundle. Should anything ever call it, it fails loudly.
const noJson = {
  name: "no-protobuf-json",
  setup(b) {
    b.onResolve({ filter: /^\.\/(from|to)-json\.js$/ }, (args) =>
      /[\\/]@bufbuild[\\/]protobuf[\\/]/.test(args.importer) ? { path: args.path, namespace: "no-json" } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "no-json" }, (args) => {
      const names = args.path.includes("from-json")
        ? ["fromJson", "fromJsonString", "mergeFromJson", "mergeFromJsonString"]
        : ["toJson", "toJsonString"];
      const fail = 'throw new Error("protobuf JSON is not part of the console build")';
      return { contents: names.map((n) => `export function ${n}() { ${fail}; }`).join("\n"), loader: "js" };
    });
  },
};

// htm templates are string literals: their indentation would survive minifying. Indentation
// is insignificant in this code and in htm's markup (it drops whitespace around newlines),
// so it is taken out of the sources as they are read.
const squeeze = {
  name: "squeeze-indentation",
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, async (args) =>
      args.path.startsWith(src + sep)
        ? { contents: (await readFile(args.path, "utf8")).replace(/\n[ \t]+/g, "\n"), loader: "js" }
        : undefined,
    );
  },
};

const common = {
  absWorkingDir: root,
  bundle: true,
  minify: true,
  sourcemap: false,
  legalComments: "eof",
  charset: "utf8",
  logLevel: "warning",
  write: false,
};

const js = await build({
  ...common,
  entryPoints: ["src/main.js"],
  outfile: "dist/app.js",
  format: "esm",
  platform: "browser",
  target: ["es2022", "chrome100", "firefox100", "safari15.4"],
  define: { "process.env.NODE_ENV": '"production"' },
  plugins: [noJson, squeeze],
});
const css = await build({
  ...common,
  entryPoints: ["src/app.css"],
  outfile: "dist/app.css",
  target: ["chrome100", "firefox100", "safari15.4"],
});

// The notices of the packages bundled into app.js (their licenses ask that copies keep them);
// served as /licenses.txt.
const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8"));
let notices = "Third-party code in app.js\n";
for (const name of Object.keys(pkg.dependencies).sort()) {
  const dir = join(root, "node_modules", name);
  const meta = JSON.parse(await readFile(join(dir, "package.json"), "utf8"));
  const file = (await readdir(dir)).find((f) => /^licen[cs]e/i.test(f));
  const text = file ? await readFile(join(dir, file), "utf8") : `${meta.license} (no license file shipped)\n`;
  notices += `\n== ${name} ${meta.version}, license ${meta.license}\n\n${text.trim()}\n`;
}

const outputs = [
  ["app.js", js.outputFiles[0].contents],
  ["licenses.txt", Buffer.from(notices)],
  ["app.css", css.outputFiles[0].contents],
  ["index.html", await readFile(join(src, "index.html"))],
  ["favicon.svg", await readFile(join(src, "favicon.svg"))],
];

for (const [name, bytes] of outputs) {
  const text = Buffer.from(bytes).toString("utf8");
  // The daemon's CSP forbids eval and inline code; the bundle must not need them, nor
  // carry a path of the machine that built it.
  if (name === "app.js" && /\beval\(|new Function\(/.test(text)) throw new Error("app.js uses eval or new Function");
  if (text.includes(root)) throw new Error(`${name} contains the build directory's path`);
  // Only what changed is written: airlockd embeds these files, and cargo rebuilds the daemon
  // (and all that links it) when one is newer than its last build, the same bytes or not.
  const old = await readFile(join(dist, name)).catch(() => null);
  if (!old || !old.equals(Buffer.from(bytes))) await writeFile(join(dist, name), bytes);
}
// Whatever else is in dist/ is no longer built.
const built = new Set(outputs.map(([name]) => name));
for (const name of await readdir(dist)) {
  if (!built.has(name)) await rm(join(dist, name), { recursive: true, force: true });
}

for (const name of (await readdir(dist)).sort()) {
  const size = (await readFile(join(dist, name))).length;
  console.log(`  dist/${name.padEnd(12)} ${String(size).padStart(8)} bytes`);
}
