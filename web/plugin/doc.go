// Package plugin serves the OpenShift console plugin of LVMS. The plugin is TypeScript and React in src/,
// built the way console plugins are built: webpack with the console SDK's ConsoleRemotePlugin
// (@openshift-console/dynamic-plugin-sdk-webpack), PatternFly 6 components, strings in the
// plugin__lvms-console i18n namespace. build.sh (run by `make generate`) installs the pinned npm packages
// and writes dist/, which is committed and embedded here: the same sources give the same files.
//
// The console loads the plugin from the operator's lvms-console Service (ConsolePlugin in
// deploy/overlays/openshift, backend basePath /plugin/); its pages read the console's JSON API (/api/v1)
// through the console's plugin proxy with the logged-in user's token. hosttest/ loads the built plugin in
// chromium through a host page built on @openshift/dynamic-plugin-sdk.
package plugin
