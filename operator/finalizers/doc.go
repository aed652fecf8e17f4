// Package finalizers adds and removes finalizers with a merge patch of metadata.finalizers only, and reports
// whether anything changed, so a reconciler can return right after adding one.
package finalizers
