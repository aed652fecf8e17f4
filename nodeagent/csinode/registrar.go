package csinode

import (
	"context"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Registrar tells kubelet about the CSI node socket through the plugin registration API: kubelet watches
// its plugins_registry directory, dials <driver>-reg.sock and asks GetInfo, then reports the outcome.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer
	driver   string
	endpoint string
	// status receives kubelet's verdicts (buffered; the latest matters).
	status chan *registerapi.RegistrationStatus
}

// NewRegistrar registers driver with its CSI socket endpoint (the path as kubelet sees it).
func NewRegistrar(driver, endpoint string) *Registrar {
	return &Registrar{driver: driver, endpoint: endpoint, status: make(chan *registerapi.RegistrationStatus, 4)}
}

// GetInfo implements registerapi.RegistrationServer.
func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.driver, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

// NotifyRegistrationStatus implements registerapi.RegistrationServer.
func (r *Registrar) NotifyRegistrationStatus(ctx context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.GetPluginRegistered() {
		ctrl.LoggerFrom(ctx).Info("Registered with kubelet", "driver", r.driver)
	} else {
		ctrl.LoggerFrom(ctx).Info("Kubelet refused the registration", "driver", r.driver, "error", s.GetError())
	}
	select {
	case r.status <- s:
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Status returns kubelet's registration verdicts as they arrive.
func (r *Registrar) Status() <-chan *registerapi.RegistrationStatus { return r.status }

// SocketPath is the registration socket in kubelet's plugins_registry directory.
func (r *Registrar) SocketPath(registryDir string) string {
	return filepath.Join(registryDir, r.driver+"-reg.sock")
}

// Serve serves the registration socket in registryDir (for example /var/lib/kubelet/plugins_registry)
// until ctx ends, and removes it then so kubelet deregisters the plugin.
func (r *Registrar) Serve(ctx context.Context, registryDir string) error {
	l, err := ListenUnix(r.SocketPath(registryDir))
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	registerapi.RegisterRegistrationServer(g, r)
	err = Serve(ctx, g, l)
	_ = os.Remove(r.SocketPath(registryDir))
	return err
}
