// Package plugin serves the OpenShift console plugin of LVMS: plugin-manifest.json and a hand-written
// plugin-entry.js (a module-federation container in plain JavaScript, no webpack build) whose page reads the
// console's JSON API (/api/v1) through the console's plugin proxy, as the logged-in user. consoleplugin.yaml
// is the ConsolePlugin object that points the console at it.
//
// Why not an iframe of the htmx pages: the console sends X-Frame-Options: DENY and a sandboxing
// Content-Security-Policy on proxied content, so a framed page would not run scripts. Why no webpack: the
// page is small, and a hand-written container avoids a Node build in `make`; React comes from the console's
// shared scope. A larger page would move to the console's SDK (@openshift-console/dynamic-plugin-sdk-webpack).
package plugin
