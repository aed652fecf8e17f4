// Package names holds every name the operator writes into the cluster and that other components, tests or
// users rely on: finalizers, labels, annotations, field owners and the names of the objects it generates.
// Keeping them in one place makes the contract with the node agent, the console and migration reviewable.
package names
