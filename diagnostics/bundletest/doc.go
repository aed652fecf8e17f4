// Package bundletest builds support bundles by hand for tests: a healthy two-node state (objects, node
// agent views, manifest) that tests break in one place each, written through the real bundle layout and
// read back through the real decoder.
package bundletest
