// Package hosttest loads the built console plugin in chromium the way the OpenShift console does: a host page
// built on @openshift/dynamic-plugin-sdk (dist/host.js, from ../src/host by ../build.sh) fetches the plugin's
// manifest and entry from /api/plugins/lvms-console/ (the LVMS server's /plugin/), and the plugin reads the
// JSON API through /api/proxy/plugin/lvms-console/api/ with the test user's token, as the console's proxy
// would add it.
package hosttest

import _ "embed"

// HostJS is the host page's bundle.
//
//go:embed dist/host.js
var HostJS []byte
