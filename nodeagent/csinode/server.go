package csinode

import (
	"context"
	"net"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lvms-dev/lvms/nodeagent/grpcsocket"
)

// Services are the CSI services one socket serves; nil ones are left out.
type Services struct {
	Identity   csi.IdentityServer
	Controller csi.ControllerServer
	// GroupController is optional (the operator's, when group snapshots are served).
	GroupController csi.GroupControllerServer
	Node            csi.NodeServer
}

// NewGRPCServer returns a gRPC server with the services registered and every call that fails logged
// (without its request, which may carry secrets).
func NewGRPCServer(ctx context.Context, s Services) *grpc.Server {
	log := ctrl.LoggerFrom(ctx)
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil {
			log.Info("CSI call failed", "method", info.FullMethod, "error", err.Error())
		}
		return resp, err
	}))
	if s.Identity != nil {
		csi.RegisterIdentityServer(g, s.Identity)
	}
	if s.Controller != nil {
		csi.RegisterControllerServer(g, s.Controller)
	}
	if s.GroupController != nil {
		csi.RegisterGroupControllerServer(g, s.GroupController)
	}
	if s.Node != nil {
		csi.RegisterNodeServer(g, s.Node)
	}
	return g
}

// ListenUnix listens on a unix socket path, replacing a stale socket file.
func ListenUnix(path string) (net.Listener, error) { return grpcsocket.Listen(path) }

// Serve serves g on l until ctx ends.
func Serve(ctx context.Context, g *grpc.Server, l net.Listener) error {
	return grpcsocket.Serve(ctx, g, l, "CSI")
}

// ServeUnix serves the services on a unix socket until ctx ends (use it as a manager.RunnableFunc).
func ServeUnix(ctx context.Context, path string, s Services) error {
	l, err := ListenUnix(path)
	if err != nil {
		return err
	}
	return Serve(ctx, NewGRPCServer(ctx, s), l)
}
