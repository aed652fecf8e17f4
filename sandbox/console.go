package sandbox

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/lvms-dev/lvms/localcluster"
)

// DefaultConsoleAddr is where the sandbox serves the console unless told otherwise.
const DefaultConsoleAddr = "127.0.0.1:8080"

// startConsole serves `lvms console` for the host's browser at Options.ConsoleAddr (port 0: one free now;
// loopback by default,
// reading the cluster with the sandbox admin's credentials, as lvms console does from a kubeconfig).
func (s *sandbox) startConsole(ctx context.Context) error {
	addr, err := s.checkConsoleAddr()
	if err != nil {
		return err
	}
	args := []string{"console", "--kubeconfig=" + KubeconfigPath(s.opts.StateDir), "--listen=" + addr}
	p, err := localcluster.StartProcess(s.opts.StateDir, "console", s.opts.Binary, args)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() {
		if err := p.Stop(); err != nil {
			s.say("  %v", err)
		}
	})
	url := "http://" + addr
	if err := waitReady(ctx, p, url+"/healthz"); err != nil {
		return fmt.Errorf("the console: %w", err)
	}
	s.consoleURL = url
	s.say("  console: %s (lvms console, log %s)", url, filepath.Join(s.opts.StateDir, "console.log"))
	return nil
}

// checkConsoleAddr settles the console's address (port 0: a free one, kept for the console) and checks
// that nothing listens there. start calls it before anything else, so a busy port is named with the way
// around it at once, not after the nodes have booted; startConsole calls it again in case it was taken since.
func (s *sandbox) checkConsoleAddr() (string, error) {
	if s.consoleAddr == "" {
		addr := s.opts.ConsoleAddr
		if addr == "" {
			addr = DefaultConsoleAddr
		}
		if host, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
			ports, err := localcluster.FreePorts(1)
			if err != nil {
				return "", err
			}
			addr = net.JoinHostPort(host, strconv.Itoa(ports[0]))
		}
		s.consoleAddr = addr
	}
	ln, err := net.Listen("tcp", s.consoleAddr)
	if err != nil {
		return "", fmt.Errorf("the console cannot serve: %w; stop what uses the address or pass --console-listen with another", err)
	}
	ln.Close()
	return s.consoleAddr, nil
}
