// Package grpcsocket serves gRPC on unix sockets the way the node agent's endpoints need it (CSI, lvmd,
// kubelet registration): a stale socket file from a previous run is replaced, and serving stops gracefully
// when the context ends.
package grpcsocket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
)

// Listen listens on a unix socket path, creating its directory and removing a stale socket file.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create the socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err // it names the socket ("listen unix <path>: ...")
	}
	return l, nil
}

// Serve serves g on l until ctx ends, then stops gracefully; what names the service in errors.
func Serve(ctx context.Context, g *grpc.Server, l net.Listener, what string) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			g.GracefulStop()
		case <-done:
		}
	}()
	if err := g.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve %s: %w", what, err)
	}
	return nil
}
