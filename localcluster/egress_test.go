package localcluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// echoServer accepts TCP connections on 127.0.0.1 and sends back what it reads until the client half-closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// connect sends "method target" through the proxy at socket and returns the connection and the response.
func connect(t *testing.T, socket, method, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, method+" "+target+" HTTP/1.1\r\nHost: 10.1.2.3\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read proxy response: %v", err)
	}
	return c, br, resp
}

func startProxy(t *testing.T, dial DialFunc) *EgressProxy {
	t.Helper()
	p, err := NewEgressProxy(filepath.Join(t.TempDir(), "egress.sock"), dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestEgressProxy_TunnelsBothWays(t *testing.T) {
	echo := echoServer(t)
	dialed := make(chan string, 1)
	p := startProxy(t, func(ctx context.Context, addr string) (net.Conn, error) {
		dialed <- addr
		var d net.Dialer
		return d.DialContext(ctx, "tcp", echo)
	})

	c, br, resp := connect(t, p.Socket(), http.MethodConnect, "10.1.2.3:10250")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s, want 200", resp.Status)
	}
	if got := <-dialed; got != "10.1.2.3:10250" {
		t.Errorf("Dial got %q, want the CONNECT target 10.1.2.3:10250", got)
	}
	if _, err := io.WriteString(c, "ping through the guest"); err != nil {
		t.Fatal(err)
	}
	// The half close travels to the echo server, whose close travels back: the reply arrives whole.
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "ping through the guest" {
		t.Errorf("echoed %q, want %q", got, "ping through the guest")
	}
}

func TestEgressProxy_FailedDialAnswers502(t *testing.T) {
	p := startProxy(t, func(context.Context, string) (net.Conn, error) {
		return nil, errors.New("no guest has address 10.9.9.9")
	})

	_, _, resp := connect(t, p.Socket(), http.MethodConnect, "10.9.9.9:10250")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %s, want 502", resp.Status)
	}
	if want := "dial 10.9.9.9:10250: no guest has address 10.9.9.9"; !strings.Contains(string(body), want) {
		t.Errorf("body %q does not contain %q", body, want)
	}
}

func TestEgressProxy_RejectsOtherMethods(t *testing.T) {
	p := startProxy(t, func(context.Context, string) (net.Conn, error) {
		t.Error("dialed for a GET")
		return nil, errors.New("unexpected")
	})

	_, _, resp := connect(t, p.Socket(), http.MethodGet, "http://10.1.2.3/")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("status %s, want 405", resp.Status)
	}
}

func TestEgressProxy_CloseEndsTunnels(t *testing.T) {
	echo := echoServer(t)
	p := startProxy(t, func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", echo)
	})
	c, br, resp := connect(t, p.Socket(), http.MethodConnect, "10.1.2.3:10250")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %s, want 200", resp.Status)
	}

	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with a tunnel open")
	}
	// The open tunnel ends: the client reads EOF (or a reset), not its deadline.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read from a tunnel after Close: %v, want EOF", err)
	}
	if _, err := net.Dial("unix", p.Socket()); err == nil {
		t.Error("the socket still accepts connections after Close")
	}
}

func TestWriteEgressConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.yaml")
	if err := writeEgressConfig(path, "/run/lvms/egress.sock"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: "/run/lvms/egress.sock"
`
	if string(got) != want {
		t.Errorf("config:\n%s\nwant:\n%s", got, want)
	}
}
