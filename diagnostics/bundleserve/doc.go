// Package bundleserve serves a support bundle as a read-only Kubernetes API, so that kubectl (get, describe,
// -o yaml, label and field selectors, discovery, logs) works against the bundle as it did against the
// cluster when the bundle was collected. Discovery and kubectl's tables come from what the collector recorded
// (discovery.json, tables/); bundles without them get discovery from a small table of built-in kinds plus
// the kinds the bundle holds, and NAME/AGE tables. Every write is refused with 405.
package bundleserve
