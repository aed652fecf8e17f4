// Package optest runs the operator in-process against a test control plane (e2e/testenv) and gives tests
// the small helpers they share: Nodes with cleanup, and waiting for a condition with a readable failure.
// There is no kubelet and no kube-controller-manager: tests play their parts explicitly (create Nodes, write
// what a node agent would report, bind volumes).
package optest
