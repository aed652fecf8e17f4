// Loads plugin-entry.js the way the OpenShift console does (global entry callback, then init with a shared
// scope holding React, then get("./LVMSPage")), renders the plugin's views with a stand-in React against a
// real LVMS JSON API, and prints what a person would read, as JSON. Used by plugin_test.go.
"use strict";
const fs = require("fs");
const vm = require("vm");
const [entryPath, base, callback] = process.argv.slice(2);

let registered = null;
globalThis.window = globalThis;
globalThis[callback] = (id, container) => { registered = { id, container }; };
vm.runInThisContext(fs.readFileSync(entryPath, "utf8"), { filename: entryPath });

const h = (type, props, ...children) => ({ type, props, children });
const fakeReact = { createElement: h, useState: (v) => [v, () => {}], useEffect: () => {} };
const scope = { react: { "18.3.1": { get: () => Promise.resolve(() => fakeReact) } } };
const text = (n) => (n == null || n === false ? "" : typeof n === "string" ? n : Array.isArray(n) ? n.map(text).join(" ") : text(n.children));

(async () => {
  if (!registered) throw new Error("the entry did not call " + callback);
  await registered.container.init(scope);
  const mod = (await registered.container.get("./LVMSPage"))();
  const overview = await mod.apiGet(base, "/overview");
  const node = await mod.apiGet(base, "/nodes/worker-b");
  const device = await mod.apiGet(base, "/nodes/worker-b/devices/" + mod.devicePath("/dev/sdb"));
  let notFound = null;
  try { await mod.apiGet(base, "/nodes/nope"); } catch (e) { notFound = e; }
  let badModule = null;
  try { await registered.container.get("./Nope"); } catch (e) { badModule = String(e.message); }
  const noop = () => {};
  console.log(JSON.stringify({
    id: registered.id,
    component: typeof mod.default,
    overview: text(mod.renderOverview(h, overview, noop)),
    node: text(mod.renderNode(h, node, noop)),
    device: text(mod.renderDevice(h, device)),
    notFound,
    badModule,
  }));
})().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
