package nodevm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
)

// TestTunnel: a connection through the tunnel reaches the target named in its first line and carries bytes
// both ways; an unreachable target is an error that names it, not a silent hang.
func TestTunnel(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	tun, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	go serveTunnel(tun)

	c, err := dialTunnel(context.Background(), tun.Addr().String(), echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for i := range 3 {
		fmt.Fprintf(c, "line %d\n", i)
		if got, err := r.ReadString('\n'); err != nil || got != fmt.Sprintf("line %d\n", i) {
			t.Fatalf("echo %d: %q, %v", i, got, err)
		}
	}

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := closed.Addr().String()
	closed.Close()
	if _, err := dialTunnel(context.Background(), tun.Addr().String(), gone); err == nil || !strings.Contains(err.Error(), gone) {
		t.Errorf("tunnel to a closed port: %v; want an error naming %s", err, gone)
	}
}
