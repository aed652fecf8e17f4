// Command etcd is etcd's server entry point, built from the published Go module so tests need no download
// from anywhere but the Go module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
