package vm

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestVMNetwork boots a VM on a restricted user-mode network: the guest reaches the one forwarded host
// service and nothing else (another host port, an outside address), the host reaches a guest listener
// through its forwarded port, and PID 1's mount namespace has the guest's root (nsenter from a pod works).
func TestVMNetwork(t *testing.T) {
	if InGuest() {
		gw := os.Getenv("NET_HOSTSIDE")
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(gw, "80"), 30*time.Second)
		if err != nil {
			t.Fatalf("dial the forwarded host service at %s:80: %v", gw, err)
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if line != "host says hello\n" {
			t.Errorf("from the host service: %q, %v", line, err)
		}
		for _, addr := range []string{net.JoinHostPort(gw, "81"), "192.0.2.1:80"} {
			if c, err := net.DialTimeout("tcp", addr, 3*time.Second); err == nil {
				// slirp may accept and then close at once: what counts is that no byte comes back.
				c.SetReadDeadline(time.Now().Add(3 * time.Second))
				if n, _ := c.Read(make([]byte, 1)); n > 0 {
					t.Errorf("the guest reached %s, which is not forwarded", addr)
				}
				c.Close()
			}
		}
		if out, err := exec.Command("nsenter", "--target", "1", "--mount", "--", "test", "-d", GuestWorkDir).CombinedOutput(); err != nil {
			t.Errorf("nsenter into PID 1's mount namespace does not see %s (init must switch_root, not chroot): %v %s", GuestWorkDir, err, out)
		}
		ln, err := net.Listen("tcp", ":8080")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		// Greet every connection until the host says it got one: slirp may hand the host a connection
		// that it closes before the greeting arrives.
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "guest %s says hello\n", c.LocalAddr().(*net.TCPAddr).IP)
				c.Close()
			}
		}()
		WaitSignal(t, "greeted")
		return
	}

	hostSvc, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostSvc.Close()
	go func() {
		for {
			c, err := hostSvc.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "host says hello\n")
			c.Close()
		}
	}()
	fromHost := FreeHostAddr(t)
	n := &Network{
		Subnet:   netip.MustParsePrefix("10.200.7.0/24"),
		ToHost:   []Forward{{GuestPort: 80, HostAddr: hostSvc.Addr().String()}},
		FromHost: []Forward{{GuestPort: 8080, HostAddr: fromHost}},
	}
	r := StartMany(t, []Options{{Name: "vm", Network: n, MemoryMiB: 512, CPUs: 1, Env: map[string]string{"NET_HOSTSIDE": n.HostSide().String()}}})
	var line string
	for range 600 { // until the guest listens; the VM's own timeout bounds the test
		if c, err := net.DialTimeout("tcp", fromHost, time.Second); err == nil {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, _ = bufio.NewReader(c).ReadString('\n')
			c.Close()
			if line != "" {
				break
			}
		}
		time.Sleep(time.Second)
	}
	r.Signal("greeted")
	r.Wait()
	if !strings.HasPrefix(line, "guest 10.200.7.2 says hello") {
		t.Errorf("through the host's forwarded port: %q, want the guest's greeting from 10.200.7.2", line)
	}
}
