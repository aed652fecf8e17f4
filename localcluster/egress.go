package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// DialFunc opens a connection to addr (host:port) on behalf of the API server.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// EgressProxy is the API server's way into the guests: it serves HTTP CONNECT on a unix socket, the
// "cluster" egress of Options.EgressProxySocket, and opens each tunnel with Dial, which the caller decides
// (the VM tier routes node and pod addresses into the right guest). A failed dial answers 502 with the
// error, which the API server quotes in its own error.
type EgressProxy struct {
	socket string
	dial   DialFunc
	ln     net.Listener
	ctx    context.Context // cancelled by Close: aborts dials in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// requestTimeout bounds how long a client may take to send its CONNECT request.
const requestTimeout = 30 * time.Second

// NewEgressProxy listens on socket (a path; an old socket there is replaced) and serves until Close.
func NewEgressProxy(socket string, dial DialFunc) (*EgressProxy, error) {
	if dial == nil {
		return nil, errors.New("egress proxy: no dial function")
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("egress proxy: remove old socket: %w", err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &EgressProxy{socket: socket, dial: dial, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

// Socket is the path the proxy listens on.
func (p *EgressProxy) Socket() string { return p.socket }

// Close stops listening, closes every tunnel and waits for their goroutines.
func (p *EgressProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track registers c to be closed by Close; it reports false (and closes c) once the proxy is closed.
func (p *EgressProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *EgressProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *EgressProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.wg.Go(func() {
			defer p.untrack(c)
			p.handle(c)
		})
	}
}

func (p *EgressProxy) handle(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(requestTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		reply(c, http.StatusBadRequest, fmt.Sprintf("egress proxy: read request: %v", err))
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		reply(c, http.StatusMethodNotAllowed, fmt.Sprintf("egress proxy serves CONNECT only, not %s", req.Method))
		return
	}
	addr := req.Host
	upstream, err := p.dial(p.ctx, addr)
	if err != nil {
		reply(c, http.StatusBadGateway, fmt.Sprintf("egress proxy: dial %s: %v", addr, err))
		return
	}
	if !p.track(upstream) {
		return
	}
	defer p.untrack(upstream)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// br may already hold bytes the client sent after its request.
	Join(c, br, upstream)
}

// Join carries bytes between a and b both ways until both directions have ended. ar reads a: a itself, or a
// buffered reader holding bytes already read from it.
func Join(a net.Conn, ar io.Reader, b net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() { splice(b, ar, a) })
	wg.Go(func() { splice(a, b, b) })
	wg.Wait()
}

// splice copies src to dst until src ends, then passes the end on: a half close where dst supports it, so
// the other direction can finish its reply, otherwise a full close of both.
func splice(dst net.Conn, src io.Reader, srcConn net.Conn) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	dst.Close()
	srcConn.Close()
}

func reply(c net.Conn, code int, msg string) {
	msg += "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(msg), msg)
}

// writeEgressConfig writes the API server's EgressSelectorConfiguration: traffic to nodes, pods and
// services ("cluster") goes through the HTTP CONNECT proxy on socket; the rest stays direct.
func writeEgressConfig(path, socket string) error {
	config := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %q
`, socket)
	return os.WriteFile(path, []byte(config), 0o644)
}
