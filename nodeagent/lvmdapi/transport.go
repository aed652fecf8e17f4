package lvmdapi

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"

	"github.com/lvms-dev/lvms/nodeagent/grpcsocket"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// Client is the lvmd API as its users see it, whether lvmd runs in process, as `lvms lvmd`, or is
// TopoLVM's own lvmd.
type Client interface {
	proto.LVServiceClient
	proto.VGServiceClient
}

type client struct {
	proto.LVServiceClient
	proto.VGServiceClient
}

// NewClient returns a Client over a gRPC connection.
func NewClient(conn grpc.ClientConnInterface) Client {
	return client{proto.NewLVServiceClient(conn), proto.NewVGServiceClient(conn)}
}

// Register registers the lvmd services and gRPC health (always SERVING) on a gRPC server.
func Register(g *grpc.Server, s *Server) {
	proto.RegisterLVServiceServer(g, s)
	proto.RegisterVGServiceServer(g, s)
	healthpb.RegisterHealthServer(g, health.NewServer())
}

// ListenUnix listens on a unix socket, removing a stale socket file left by a previous run.
func ListenUnix(path string) (net.Listener, error) { return grpcsocket.Listen(path) }

// Serve serves s on l until ctx ends.
func Serve(ctx context.Context, l net.Listener, s *Server) error {
	g := grpc.NewServer()
	Register(g, s)
	return grpcsocket.Serve(ctx, g, l, "lvmd")
}

// Dial connects to an lvmd on a unix socket.
func Dial(path string) (Client, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to lvmd at %s: %w", path, err)
	}
	return NewClient(conn), conn, nil
}

// InProcess serves s over an in-memory connection and returns a client for it; stop closes both.
func InProcess(s *Server) (Client, func(), error) {
	// Each connection allocates two buffers of this size up front; larger messages stream through.
	l := bufconn.Listen(64 << 10)
	g := grpc.NewServer()
	Register(g, s)
	go func() { _ = g.Serve(l) }()
	conn, err := grpc.NewClient("passthrough:///lvmd",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		g.Stop()
		return nil, nil, fmt.Errorf("in-process lvmd client: %w", err)
	}
	return NewClient(conn), func() { _ = conn.Close(); g.Stop() }, nil
}
