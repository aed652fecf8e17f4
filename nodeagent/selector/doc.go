// Package selector decides which block devices a volume group's selector picks, and explains every
// decision: v1alpha1 deviceSelector paths/optionalPaths (or no selector: every device), and v2alpha1
// deviceSelectorTerms (terms ORed, expressions ANDed). A device that is not picked gets the term and
// expression that failed and why; paths the selector names that do not exist are reported by name.
package selector
