// Package proto holds the generated Go code of lvmd.proto, TopoLVM's lvmd gRPC API (proto package
// "proto"). Regenerate with `make generate`.
package proto
