//go:build tools

// Package tools pins the control-plane binaries the tests build: kube-apiserver from k8s.io/kubernetes and
// etcd from go.etcd.io/etcd/server/v3 (see ./etcd). build.sh builds them into a cache keyed by version.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
