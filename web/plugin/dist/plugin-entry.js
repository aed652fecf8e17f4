/*
 * LVMS console plugin entry for the OpenShift console, written by hand: no webpack build.
 *
 * It is a module-federation container ({init, get}) that the console registers through its global entry
 * callback: __load_plugin_entry__(name, container) on console 4.22+, loadPluginEntry("name@version",
 * container) before. It exposes one module, LVMSPage, whose default export is a React component; React comes
 * from the console's shared scope, so the plugin ships no copy of it.
 *
 * The page reads the LVMS JSON API through the console's plugin proxy
 * (/api/proxy/plugin/lvms-console/api/api/v1/...), which adds the user's bearer token: the server reads the
 * cluster as that user. It shows what differs, the nodes, and for a node its volume groups and devices;
 * a device shows every reason it was excluded with the agent's sentence and the console's explanation.
 *
 * The render functions are pure (h = React.createElement, data from the API) and exported for tests.
 */
(function () {
  "use strict";

  var PLUGIN = "lvms-console";
  var VERSION = "0.1.0";
  var API = "/api/proxy/plugin/" + PLUGIN + "/api/api/v1";

  function apiGet(base, path) {
    return fetch(base + path, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) {
          var e = body && body.error ? body.error : { status: r.status, code: "Error", message: r.statusText };
          throw e;
        }
        return body;
      });
    });
  }

  function devicePath(kname) {
    return kname.indexOf("/dev/") === 0 ? kname.slice(5).split("/").map(encodeURIComponent).join("/") : encodeURIComponent(kname);
  }

  function chip(h, text, health) {
    return h("span", { className: "lvms-chip lvms-" + (health || "unknown"), "data-test": "chip" }, text);
  }

  function diffMarker(h) {
    return h("span", { className: "lvms-diff", "data-test": "diff-marker", title: "actual state differs from desired state" }, "\u2260 differs");
  }

  function explanation(h, x) {
    return h("div", { className: "lvms-explanation", "data-test": "explanation" },
      h("strong", null, x.title),
      h("p", null, x.why),
      x.warning ? h("p", { className: "lvms-warning", "data-test": "destructive-warning" }, "Warning: " + x.warning) : null,
      h("ol", null, (x.next || []).map(function (s, i) {
        return h("li", { key: i }, s.text, s.command ? h("pre", null, s.command) : null);
      })));
  }

  function table(h, head, rows) {
    return h("table", { className: "pf-v6-c-table pf-m-compact lvms-table" },
      h("thead", null, h("tr", null, head.map(function (c, i) { return h("th", { key: i }, c); }))),
      h("tbody", null, rows));
  }

  function link(h, text, onClick) {
    return h("a", { href: "#", onClick: function (e) { e.preventDefault(); onClick(); } }, text);
  }

  function renderOverview(h, o, go) {
    var diffs = (o.differences || []).map(function (d, i) {
      return h("tr", { key: i, "data-test": "difference-row" },
        h("td", null, diffMarker(h)),
        h("td", null, d.node ? link(h, d.node, function () { go({ node: d.node }); }) : "all nodes"),
        h("td", null, d.volumeGroup || d.deviceClass || ""),
        h("td", null, d.device && d.node ? link(h, d.device, function () { go({ node: d.node, device: d.device }); }) : ""),
        h("td", null, d.desired), h("td", null, d.actual), h("td", null, d.explanation.title));
    });
    var nodes = (o.nodes || []).map(function (n) {
      return h("tr", { key: n.name, "data-test": "node-row" },
        h("td", null, link(h, n.name, function () { go({ node: n.name }); })),
        h("td", null, chip(h, n.state, n.health)),
        h("td", null, String(n.devicesInUse)), h("td", null, String(n.excluded)), h("td", null, String(n.missing)),
        h("td", null, n.differences > 0 ? diffMarker(h) : null, " ", String(n.differences)));
    });
    return h("div", { "data-test": "lvms-overview" },
      h("h2", null, "What differs"),
      diffs.length ? table(h, ["", "Node", "Volume group / class", "Device", "Desired", "Actual", "Why"], diffs)
        : h("p", null, "Actual state matches desired state."),
      h("h2", null, "Nodes"),
      table(h, ["Node", "State", "In use", "Excluded", "Missing", "Differences"], nodes));
  }

  function renderNode(h, n, go) {
    return h("div", { "data-test": "lvms-node" },
      h("h2", null, n.name, " ", chip(h, n.state, n.health)),
      n.message ? h("p", null, n.message) : null,
      (n.volumeGroups || []).map(function (g) {
        return h("div", { key: g.name + g.source.name, "data-test": "vg" },
          h("h3", null, "Volume group " + g.name + " ", chip(h, g.state, g.health), g.differs ? diffMarker(h) : null),
          h("p", null, "Desired: " + g.desired),
          table(h, ["", "Device", "State", "Desired", "Actual"], (g.devices || []).map(function (r) {
            return h("tr", { key: r.kname + r.state, "data-test": "device-row" },
              h("td", null, r.differs ? diffMarker(h) : null),
              h("td", null, link(h, r.kname, function () { go({ node: n.name, device: r.kname }); })),
              h("td", null, chip(h, r.state, r.health)), h("td", null, r.desired), h("td", null, r.actual));
          })));
      }));
  }

  function renderDevice(h, d) {
    return h("div", { "data-test": "lvms-device" },
      h("h2", null, d.kname + " on " + d.node),
      (d.entries || []).map(function (e) {
        return h("div", { key: e.volumeGroup + e.source.name, "data-test": "device-entry" },
          h("h3", null, "Volume group " + e.volumeGroup + " ", chip(h, e.row.state, e.row.health), e.row.differs ? diffMarker(h) : null),
          h("p", null, "Desired: " + e.row.desired + " \u00b7 Actual: " + e.row.actual),
          e.row.explanation ? explanation(h, e.row.explanation) : null,
          (e.row.reasons || []).map(function (r, i) {
            return h("div", { key: i, "data-test": "reason" },
              h("p", null, chip(h, r.code, "info"), " Node agent: \u201c" + r.sentence + "\u201d"),
              explanation(h, r.explanation));
          }));
      }));
  }

  function renderError(h, e) {
    return h("div", { className: "lvms-error", "data-test": "lvms-error" }, (e.code || "Error") + ": " + (e.message || String(e)));
  }

  // makePage builds the React component once React is known.
  function makePage(React) {
    var h = React.createElement;
    return function LVMSPage() {
      var nav = React.useState({});
      var state = React.useState({ loading: true });
      var where = nav[0];
      React.useEffect(function () {
        var path = "/overview";
        if (where.node && where.device) {
          path = "/nodes/" + encodeURIComponent(where.node) + "/devices/" + devicePath(where.device);
        } else if (where.node) {
          path = "/nodes/" + encodeURIComponent(where.node);
        }
        var live = true;
        function load() {
          apiGet(API, path).then(function (data) { if (live) { state[1]({ data: data }); } },
            function (err) { if (live) { state[1]({ error: err }); } });
        }
        load();
        var t = setInterval(load, 5000);
        return function () { live = false; clearInterval(t); };
      }, [where.node, where.device]);
      var s = state[0];
      var body = s.error ? renderError(h, s.error) : s.loading ? h("p", null, "Loading\u2026")
        : where.device ? renderDevice(h, s.data) : where.node ? renderNode(h, s.data, nav[1]) : renderOverview(h, s.data, nav[1]);
      return h("div", { className: "pf-v6-c-page__main-section lvms-page" },
        h("h1", null, "LVM Storage"),
        where.node ? h("p", null, link(h, "\u2190 Overview", function () { nav[1]({}); })) : null,
        body);
    };
  }

  // The shared scope the console passes to init; React is taken from it when the module is requested.
  var shareScope = null;

  function sharedModule(name) {
    var versions = shareScope && shareScope[name];
    if (!versions) {
      return Promise.reject(new Error(PLUGIN + ": the console did not share " + name));
    }
    var keys = Object.keys(versions).sort();
    return Promise.resolve(versions[keys[keys.length - 1]].get()).then(function (factory) { return factory(); });
  }

  var container = {
    init: function (scope) { shareScope = scope; return Promise.resolve(); },
    get: function (module) {
      var name = String(module).replace(/^\.\//, "");
      if (name !== "LVMSPage") {
        return Promise.reject(new Error(PLUGIN + ": no exposed module " + name));
      }
      return sharedModule("react").then(function (React) {
        var exports = { default: makePage(React), renderOverview: renderOverview, renderNode: renderNode, renderDevice: renderDevice, apiGet: apiGet, devicePath: devicePath };
        return function () { return exports; };
      });
    },
  };

  var root = typeof window !== "undefined" ? window : globalThis;
  if (typeof root.__load_plugin_entry__ === "function") {
    root.__load_plugin_entry__(PLUGIN, container);
  } else if (typeof root.loadPluginEntry === "function") {
    root.loadPluginEntry(PLUGIN + "@" + VERSION, container);
  }
})();
